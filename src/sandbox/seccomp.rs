//! A seccomp filter that turns the network off where no network namespace
//! could: every `socket` call of a domain other than AF_UNIX fails with
//! EACCES (so no TCP, UDP, raw, netlink… sockets), and `io_uring_setup`
//! fails with ENOSYS, because io_uring can create sockets without making
//! the `socket` system call. System calls of a foreign ABI (i386 or x32 on
//! x86_64) are refused too: they would get around the syscall numbers
//! checked here.

use std::io;

/// `AUDIT_ARCH_*` of the native ABI, the only one the filter lets through.
#[cfg(target_arch = "x86_64")]
const ARCH: Option<u32> = Some(0xC000_003E);
#[cfg(target_arch = "aarch64")]
const ARCH: Option<u32> = Some(0xC000_00B7);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARCH: Option<u32> = None;

/// x32 system calls are the x86_64 ones with this bit set.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

// Offsets in `struct seccomp_data` (little-endian: the low half of the
// first argument comes first).
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
const ARG0_OFFSET: u32 = 16;

const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JUMP_EQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JUMP_GE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

fn errno(code: libc::c_int) -> u32 {
    libc::SECCOMP_RET_ERRNO | (code as u32 & libc::SECCOMP_RET_DATA)
}

fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// A conditional jump: `jt` instructions ahead when true, `jf` when false.
fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The filter program for the native ABI `arch`.
fn program(arch: u32) -> Vec<libc::sock_filter> {
    let mut program = vec![
        statement(LOAD, ARCH_OFFSET),
        jump(JUMP_EQ, arch, 1, 0),
        statement(RETURN, KILL),
        statement(LOAD, NR_OFFSET),
    ];
    if cfg!(target_arch = "x86_64") {
        program.push(jump(JUMP_GE, X32_SYSCALL_BIT, 0, 1));
        program.push(statement(RETURN, errno(libc::EPERM)));
    }
    program.extend([
        jump(JUMP_EQ, libc::SYS_io_uring_setup as u32, 0, 1),
        statement(RETURN, errno(libc::ENOSYS)),
        jump(JUMP_EQ, libc::SYS_socket as u32, 1, 0),
        statement(RETURN, ALLOW),
        statement(LOAD, ARG0_OFFSET),
        jump(JUMP_EQ, libc::AF_UNIX as u32, 0, 1),
        statement(RETURN, ALLOW),
        statement(RETURN, errno(libc::EACCES)),
    ]);
    program
}

/// Installs the filter on this thread; what it execs keeps it. Needs
/// no_new_privs (or CAP_SYS_ADMIN).
pub fn deny_network() -> Result<(), String> {
    let Some(arch) = ARCH else {
        return Err("no seccomp filter for this processor architecture".into());
    };
    let mut filter = program(arch);
    let prog = libc::sock_fprog {
        len: u16::try_from(filter.len()).map_err(|_| "the seccomp filter is too long")?,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: `prog` points to `filter`, both alive for the call; the
    // kernel copies the program.
    let result = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::c_ulong::from(libc::SECCOMP_MODE_FILTER),
            &prog as *const libc::sock_fprog,
        )
    };
    if result != 0 {
        return Err(format!(
            "cannot install the seccomp filter: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// What the probe checks after [`deny_network`]: an IP socket is refused,
/// a Unix one is not.
pub fn check_filter() -> Result<(), String> {
    for (domain, refused) in [(libc::AF_INET, true), (libc::AF_UNIX, false)] {
        // SAFETY: socket takes no pointers.
        let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        let error = io::Error::last_os_error();
        if fd >= 0 {
            // SAFETY: the descriptor was just opened and is used nowhere
            // else.
            unsafe { libc::close(fd) };
        }
        match (refused, fd >= 0) {
            (true, true) => return Err("the seccomp filter let an IP socket through".into()),
            (false, false) => {
                return Err(format!("the seccomp filter refused a Unix socket: {error}"))
            }
            _ => {}
        }
    }
    Ok(())
}
