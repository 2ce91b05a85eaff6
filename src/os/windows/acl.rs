//! Private files on Windows: an access list that admits the current user
//! alone, marked protected so that nothing is inherited from the folder
//! above (the Windows form of mode 0600 and 0700).

use std::io;
use std::mem::size_of;
use std::ptr::{null, null_mut};
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, PSID};
use windows_sys::Win32::Security::Authorization::{SetSecurityInfo, SE_FILE_OBJECT};
use windows_sys::Win32::Security::{
    AddAccessAllowedAceEx, GetLengthSid, GetTokenInformation, InitializeAcl, TokenUser,
    ACCESS_ALLOWED_ACE, ACL, ACL_REVISION, CONTAINER_INHERIT_ACE, DACL_SECURITY_INFORMATION,
    OBJECT_INHERIT_ACE, PROTECTED_DACL_SECURITY_INFORMATION, TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::Storage::FileSystem::FILE_ALL_ACCESS;
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

/// A handle closed when dropped.
struct Handle(HANDLE);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and closed once.
        unsafe { CloseHandle(self.0) };
    }
}

/// Runs `f` with the SID of the user this process runs as.
fn with_user<T>(f: impl FnOnce(PSID) -> io::Result<T>) -> io::Result<T> {
    // SAFETY: the token handle is checked and closed on drop; the buffer
    // is sized by the first call and 8-byte aligned, and the SID pointer
    // `TOKEN_USER` holds points into it while `f` runs.
    unsafe {
        let mut token: HANDLE = 0;
        if OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) == 0 {
            return Err(io::Error::last_os_error());
        }
        let token = Handle(token);
        let mut needed = 0u32;
        GetTokenInformation(token.0, TokenUser, null_mut(), 0, &mut needed);
        if needed == 0 || needed > 64 * 1024 {
            return Err(io::Error::last_os_error());
        }
        let mut buffer = vec![0u64; (needed as usize).div_ceil(8)];
        if GetTokenInformation(
            token.0,
            TokenUser,
            buffer.as_mut_ptr().cast(),
            needed,
            &mut needed,
        ) == 0
        {
            return Err(io::Error::last_os_error());
        }
        let user = &*(buffer.as_ptr() as *const TOKEN_USER);
        f(user.User.Sid)
    }
}

/// Gives the file or folder behind `handle` (opened with `WRITE_DAC`) an
/// access list that admits the current user alone, with every right;
/// for a folder the entry is inherited by what it will hold.
pub(super) fn protect(handle: HANDLE, folder: bool) -> io::Result<()> {
    with_user(|sid| {
        // SAFETY: the list is built in a buffer of the size the calls
        // need (header, one entry, the SID) and outlives SetSecurityInfo,
        // which copies it.
        unsafe {
            let size = size_of::<ACL>() + size_of::<ACCESS_ALLOWED_ACE>() - size_of::<u32>()
                + GetLengthSid(sid) as usize;
            let mut acl = vec![0u64; size.div_ceil(8)];
            let list: *mut ACL = acl.as_mut_ptr().cast();
            if InitializeAcl(list, size as u32, ACL_REVISION) == 0 {
                return Err(io::Error::last_os_error());
            }
            let inherit = if folder {
                OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE
            } else {
                0
            };
            if AddAccessAllowedAceEx(list, ACL_REVISION, inherit, FILE_ALL_ACCESS, sid) == 0 {
                return Err(io::Error::last_os_error());
            }
            let status = SetSecurityInfo(
                handle,
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
                null_mut(),
                null_mut(),
                list,
                null(),
            );
            match status {
                0 => Ok(()),
                code => Err(io::Error::from_raw_os_error(code as i32)),
            }
        }
    })
}

#[cfg(test)]
/// Whether the access list of the file behind `handle` (opened with
/// `READ_CONTROL`) is protected and admits the current user alone.
pub(super) fn is_private(handle: HANDLE) -> io::Result<bool> {
    use windows_sys::Win32::Foundation::LocalFree;
    use windows_sys::Win32::Security::Authorization::GetSecurityInfo;
    use windows_sys::Win32::Security::{
        EqualSid, GetAce, GetSecurityDescriptorControl, SE_DACL_PROTECTED,
    };
    with_user(|sid| {
        // SAFETY: GetSecurityInfo allocates the descriptor (freed below)
        // and points `list` into it; each entry read is one GetAce gives.
        unsafe {
            let mut list: *mut ACL = null_mut();
            let mut descriptor = null_mut();
            let status = GetSecurityInfo(
                handle,
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION,
                null_mut(),
                null_mut(),
                &mut list,
                null_mut(),
                &mut descriptor,
            );
            if status != 0 {
                return Err(io::Error::from_raw_os_error(status as i32));
            }
            let mut control = 0u16;
            let mut revision = 0u32;
            let protected = GetSecurityDescriptorControl(descriptor, &mut control, &mut revision)
                != 0
                && control & SE_DACL_PROTECTED != 0;
            let mut only_me = !list.is_null() && (*list).AceCount == 1;
            if only_me {
                let mut entry = null_mut();
                only_me = GetAce(list, 0, &mut entry) != 0 && {
                    let ace = &*(entry as *const ACCESS_ALLOWED_ACE);
                    let ace_sid = std::ptr::addr_of!(ace.SidStart) as PSID;
                    EqualSid(ace_sid, sid) != 0
                };
            }
            LocalFree(descriptor as _);
            Ok(protected && only_me)
        }
    })
}
