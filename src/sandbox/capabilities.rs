//! Drops every capability before the command runs: the bounding set (so
//! an exec of any file cannot give one back), the ambient, inheritable,
//! permitted and effective sets. As root this is what keeps the command
//! out of other processes' memory and environment (CAP_SYS_PTRACE, and
//! the uid check that root passes for every process) and off files it
//! does not own (CAP_DAC_OVERRIDE): with no capability, Landlock's
//! scoping of ptrace applies to root as to anyone. In a user namespace
//! it takes back the capabilities the namespace gave.

use std::io;

// From the kernel's uapi `linux/capability.h` (the libc crate does not
// name them): the version of the capget/capset structures with 64-bit
// sets, and CAP_SETPCAP, which dropping from the bounding set needs.
const VERSION_3: u32 = 0x2008_0522;
const CAP_SETPCAP: u32 = 8;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`; version 3 takes two of them (the low
/// and high 32 capabilities).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn capget() -> io::Result<[Data; 2]> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: `header` and `data` are live structures of the layout the
    // kernel expects for version 3; it writes only into `data`.
    let result = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut Header,
            data.as_mut_ptr(),
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(data)
}

fn capset(data: &[Data; 2]) -> io::Result<()> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    // SAFETY: as for capget; the kernel only reads `data`.
    let result =
        unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn prctl(option: libc::c_int, arg: libc::c_ulong, arg2: libc::c_ulong) -> libc::c_int {
    // SAFETY: these prctl options take plain integers.
    unsafe { libc::prctl(option, arg, arg2, 0 as libc::c_ulong, 0 as libc::c_ulong) }
}

/// Drops every capability of this process, for good; an error means the
/// command must not run.
pub(super) fn drop_all() -> Result<(), String> {
    let fail = |what: &str, error: io::Error| format!("cannot drop {what}: {error}");
    let before = capget().map_err(|error| fail("the capabilities", error))?;
    let may_shrink_bounding = before[0].effective & (1 << CAP_SETPCAP) != 0;
    // The bounding set: every capability the kernel knows (PR_CAPBSET_READ
    // fails past the last one).
    let mut cap: libc::c_ulong = 0;
    loop {
        let present = prctl(libc::PR_CAPBSET_READ, cap, 0);
        if present < 0 {
            break;
        }
        if present == 1 && prctl(libc::PR_CAPBSET_DROP, cap, 0) != 0 {
            let error = io::Error::last_os_error();
            // Without CAP_SETPCAP there is nothing to drop it with, and
            // nothing to fear from it: no_new_privs keeps an exec from
            // raising the (empty) permitted set.
            if may_shrink_bounding {
                return Err(fail(
                    &format!("capability {cap} from the bounding set"),
                    error,
                ));
            }
        }
        cap += 1;
    }
    if prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
        0,
    ) != 0
    {
        let error = io::Error::last_os_error();
        // Kernels before 4.3 have no ambient set.
        if error.raw_os_error() != Some(libc::EINVAL) {
            return Err(fail("the ambient capabilities", error));
        }
    }
    capset(&[Data::default(); 2]).map_err(|error| fail("the capabilities", error))?;
    let after = capget().map_err(|error| fail("the capabilities", error))?;
    if after
        .iter()
        .any(|d| d.effective | d.permitted | d.inheritable != 0)
    {
        return Err("capabilities are left after dropping them all".into());
    }
    Ok(())
}
