//! A seccomp filter, installed on every sandboxed command, network
//! namespace or not:
//!
//! - `socket` fails with EACCES for AF_UNIX always (a pathname Unix socket
//!   reaches a server outside the sandbox: the docker socket, the user's
//!   D-Bus, ssh-agent, and no Landlock right of the kernels this supports
//!   covers connecting to one), and for every domain when the network is
//!   off (no TCP, UDP, raw, netlink… sockets);
//! - `socketpair` is allowed only for AF_UNIX stream and seqpacket pairs,
//!   which are connected to each other and can reach nothing else (a
//!   datagram one could `connect` or `sendto` a path outside);
//! - `io_uring_setup` fails with ENOSYS, because io_uring can create and
//!   connect sockets without making those system calls.
//!
//! System calls of a foreign ABI (i386 or x32 on x86_64) are refused too:
//! they would get around the syscall numbers checked here.

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

// Offsets in `struct seccomp_data` (little-endian: the low half of each
// argument comes first; the arguments checked are C ints).
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
const ARG0_OFFSET: u32 = 16;
const ARG1_OFFSET: u32 = 24;

const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JUMP_EQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JUMP_GE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const AND: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
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
fn program(arch: u32, network: bool) -> Vec<libc::sock_filter> {
    let refuse = statement(RETURN, errno(libc::EACCES));
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
        // socket: to `socket(domain, …)` below.
        jump(JUMP_EQ, libc::SYS_socket as u32, 2, 0),
        // socketpair: to `socketpair(domain, type, …)` below.
        jump(JUMP_EQ, libc::SYS_socketpair as u32, 5, 0),
        statement(RETURN, ALLOW),
        // socket(domain, …)
        statement(LOAD, ARG0_OFFSET),
        jump(JUMP_EQ, libc::AF_UNIX as u32, 1, 0),
        statement(RETURN, if network { ALLOW } else { errno(libc::EACCES) }),
        refuse,
        // socketpair(domain, type, …)
        statement(LOAD, ARG0_OFFSET),
        jump(JUMP_EQ, libc::AF_UNIX as u32, 0, 4),
        statement(LOAD, ARG1_OFFSET),
        statement(AND, !((libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u32)),
        jump(JUMP_EQ, libc::SOCK_STREAM as u32, 2, 0),
        jump(JUMP_EQ, libc::SOCK_SEQPACKET as u32, 1, 0),
        refuse,
        statement(RETURN, ALLOW),
    ]);
    program
}

/// Installs the filter on this thread; what it execs keeps it. `network`:
/// whether the sockets of the network may be made. Needs no_new_privs (or
/// CAP_SYS_ADMIN).
pub(super) fn install(network: bool) -> Result<(), String> {
    let Some(arch) = ARCH else {
        return Err("no seccomp filter for this processor architecture".into());
    };
    let mut filter = program(arch, network);
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

/// What the probe checks after `install(false)`: IP and Unix sockets are
/// refused, a stream pair is not, a datagram pair is.
pub(super) fn check_filter() -> Result<(), String> {
    let close = |fd: libc::c_int| {
        // SAFETY: the descriptor was just opened and is used nowhere else.
        unsafe { libc::close(fd) };
    };
    for domain in [libc::AF_INET, libc::AF_UNIX] {
        // SAFETY: socket takes no pointers.
        let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd >= 0 {
            close(fd);
            return Err(format!(
                "the seccomp filter let a socket of domain {domain} through"
            ));
        }
    }
    for (kind, allowed) in [(libc::SOCK_STREAM, true), (libc::SOCK_DGRAM, false)] {
        let mut pair = [-1; 2];
        // SAFETY: `pair` has room for the two descriptors socketpair writes.
        let result = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                kind | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        };
        let error = io::Error::last_os_error();
        if result == 0 {
            close(pair[0]);
            close(pair[1]);
        }
        match (allowed, result == 0) {
            (true, false) => {
                return Err(format!("the seccomp filter refused a socket pair: {error}"))
            }
            (false, true) => {
                return Err("the seccomp filter let a datagram socket pair through".into())
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `program` as the kernel would on one system call: the
    /// instructions this module emits, nothing more.
    fn run(program: &[libc::sock_filter], arch: u32, nr: u32, args: [u32; 2]) -> u32 {
        let mut accumulator = 0u32;
        let mut at = 0usize;
        loop {
            let op = program[at];
            at += 1;
            match op.code {
                LOAD => {
                    accumulator = match op.k {
                        NR_OFFSET => nr,
                        ARCH_OFFSET => arch,
                        ARG0_OFFSET => args[0],
                        ARG1_OFFSET => args[1],
                        other => panic!("a load of offset {other}"),
                    }
                }
                AND => accumulator &= op.k,
                JUMP_EQ | JUMP_GE => {
                    let taken = if op.code == JUMP_EQ {
                        accumulator == op.k
                    } else {
                        accumulator >= op.k
                    };
                    at += usize::from(if taken { op.jt } else { op.jf });
                }
                RETURN => return op.k,
                other => panic!("an unknown instruction {other}"),
            }
        }
    }

    #[test]
    fn the_filter_refuses_unix_sockets_and_datagram_pairs() {
        let arch = 0xC000_003E;
        let unix = libc::AF_UNIX as u32;
        let inet = libc::AF_INET as u32;
        let socket = libc::SYS_socket as u32;
        let pair = libc::SYS_socketpair as u32;
        let stream = (libc::SOCK_STREAM | libc::SOCK_CLOEXEC) as u32;
        let seqpacket = libc::SOCK_SEQPACKET as u32;
        let dgram = (libc::SOCK_DGRAM | libc::SOCK_NONBLOCK) as u32;
        let refused = errno(libc::EACCES);
        for network in [false, true] {
            let filter = program(arch, network);
            let call = |nr, args| run(&filter, arch, nr, args);
            assert_eq!(call(socket, [unix, stream]), refused);
            let ip = if network { ALLOW } else { refused };
            assert_eq!(call(socket, [inet, stream]), ip);
            assert_eq!(call(pair, [unix, stream]), ALLOW);
            assert_eq!(call(pair, [unix, seqpacket]), ALLOW);
            assert_eq!(call(pair, [unix, dgram]), refused);
            assert_eq!(call(pair, [inet, stream]), refused);
            assert_eq!(call(libc::SYS_read as u32, [0, 0]), ALLOW);
            assert_eq!(
                call(libc::SYS_io_uring_setup as u32, [0, 0]),
                errno(libc::ENOSYS)
            );
            assert_eq!(run(&filter, 0x4000_0003, socket, [unix, stream]), KILL);
        }
    }
}
