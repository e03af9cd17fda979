//! The seccomp filter behind [`crate::NetworkPolicy::Denied`]: `socket()` fails with `EPERM` for
//! every domain but `AF_UNIX` and TCP over `AF_INET`/`AF_INET6` (which Landlock then confines),
//! so UDP, ICMP, raw, packet and netlink sockets are refused; so are TCP Fast Open sends
//! (`MSG_FASTOPEN` connects without the `connect()` hook Landlock relies on) and `io_uring_setup`
//! (an io_uring can open sockets without calling `socket()`).
//!
//! The program is about twenty classic-BPF instructions, written here rather than pulled from a
//! crate: the Rust seccomp crates either wrap libseccomp (a C library) or bring a policy compiler
//! far larger than this filter. A foreign architecture (an i386 or x32 binary, whose syscall
//! numbers differ) is killed rather than slipping past the checks.

use libc::sock_filter;

/// `AUDIT_ARCH_*` of the architecture this crate is built for, where the filter supports it.
#[cfg(target_arch = "x86_64")]
pub(crate) const AUDIT_ARCH: Option<u32> = Some(0xC000_003E);
#[cfg(target_arch = "aarch64")]
pub(crate) const AUDIT_ARCH: Option<u32> = Some(0xC000_00B7);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) const AUDIT_ARCH: Option<u32> = None;

/// x32 syscalls share x86_64's audit arch but set this bit in the syscall number.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(not(target_arch = "x86_64"))]
const X32_SYSCALL_BIT: Option<u32> = None;

/// `offsetof(struct seccomp_data, …)`: `nr`, `arch`, and the low 32 bits of `args[i]` (every
/// argument checked here is an `int` to the kernel).
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const fn offset_arg(i: u32) -> u32 {
    16 + 8 * i + if cfg!(target_endian = "big") { 4 } else { 0 }
}

/// `SOCK_TYPE_MASK`: the socket type without `SOCK_NONBLOCK` / `SOCK_CLOEXEC`.
const SOCK_TYPE_MASK: u32 = 0xf;

const LD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const AND: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Allow,
    Deny,
    Kill,
    Socket,
    Inet,
    FlagsArg2,
    FlagsArg3,
}

/// Where a conditional jump goes.
#[derive(Debug, Clone, Copy)]
enum To {
    Next,
    L(Label),
}

enum Op {
    Stmt(u16, u32),
    Jump(u16, u32, To, To),
    At(Label),
}

/// The filter for this architecture, or `None` where the crate has no syscall table for it.
/// `refuse_inet` refuses TCP sockets as well (when Landlock cannot confine TCP ports). `kill` is
/// the action for a foreign architecture (`SECCOMP_RET_KILL_PROCESS` where the kernel has it).
pub(crate) fn program(refuse_inet: bool, kill: u32) -> Option<Vec<sock_filter>> {
    use To::{L, Next};
    let arch = AUDIT_ARCH?;
    let nr = |n: libc::c_long| n as u32;
    let mut ops = vec![
        Op::Stmt(LD, OFFSET_ARCH),
        Op::Jump(JEQ, arch, Next, L(Label::Kill)),
        Op::Stmt(LD, OFFSET_NR),
    ];
    if let Some(bit) = X32_SYSCALL_BIT {
        ops.push(Op::Jump(JGE, bit, L(Label::Kill), Next));
    }
    ops.extend([
        Op::Jump(JEQ, nr(libc::SYS_io_uring_setup), L(Label::Deny), Next),
        Op::Jump(JEQ, nr(libc::SYS_socket), L(Label::Socket), Next),
        Op::Jump(JEQ, nr(libc::SYS_sendto), L(Label::FlagsArg3), Next),
        Op::Jump(JEQ, nr(libc::SYS_sendmsg), L(Label::FlagsArg2), Next),
        Op::Jump(JEQ, nr(libc::SYS_sendmmsg), L(Label::FlagsArg3), Next),
        Op::Stmt(RET, libc::SECCOMP_RET_ALLOW),
        // sendmsg(fd, msg, flags)
        Op::At(Label::FlagsArg2),
        Op::Stmt(LD, offset_arg(2)),
        Op::Jump(
            JSET,
            libc::MSG_FASTOPEN as u32,
            L(Label::Deny),
            L(Label::Allow),
        ),
        // sendto(fd, buf, len, flags, …), sendmmsg(fd, vec, vlen, flags)
        Op::At(Label::FlagsArg3),
        Op::Stmt(LD, offset_arg(3)),
        Op::Jump(
            JSET,
            libc::MSG_FASTOPEN as u32,
            L(Label::Deny),
            L(Label::Allow),
        ),
        // socket(domain, type, protocol)
        Op::At(Label::Socket),
        Op::Stmt(LD, offset_arg(0)),
        Op::Jump(JEQ, libc::AF_UNIX as u32, L(Label::Allow), Next),
    ]);
    if refuse_inet {
        ops.push(Op::Stmt(RET, deny()));
    }
    ops.extend([
        Op::Jump(JEQ, libc::AF_INET as u32, L(Label::Inet), Next),
        Op::Jump(JEQ, libc::AF_INET6 as u32, L(Label::Inet), L(Label::Deny)),
        Op::At(Label::Inet),
        Op::Stmt(LD, offset_arg(1)),
        Op::Stmt(AND, SOCK_TYPE_MASK),
        Op::Jump(JEQ, libc::SOCK_STREAM as u32, Next, L(Label::Deny)),
        Op::Stmt(LD, offset_arg(2)),
        Op::Jump(JEQ, 0, L(Label::Allow), Next),
        Op::Jump(
            JEQ,
            libc::IPPROTO_TCP as u32,
            L(Label::Allow),
            L(Label::Deny),
        ),
        Op::At(Label::Allow),
        Op::Stmt(RET, libc::SECCOMP_RET_ALLOW),
        Op::At(Label::Deny),
        Op::Stmt(RET, deny()),
        Op::At(Label::Kill),
        Op::Stmt(RET, kill),
    ]);
    assemble(&ops)
}

/// The action for a refused call: fail with `EPERM`.
fn deny() -> u32 {
    libc::SECCOMP_RET_ERRNO | (libc::EPERM as u32 & libc::SECCOMP_RET_DATA)
}

/// Resolves labels to relative jump offsets; `None` if a jump would not fit (it always does for
/// this program; the check keeps a future edit honest).
fn assemble(ops: &[Op]) -> Option<Vec<sock_filter>> {
    let mut positions = Vec::new();
    let mut index = 0usize;
    for op in ops {
        match op {
            Op::At(label) => positions.push((*label, index)),
            _ => index += 1,
        }
    }
    let mut out = Vec::with_capacity(index);
    for op in ops {
        let here = out.len();
        let offset = |to: To| -> Option<u8> {
            match to {
                To::Next => Some(0),
                To::L(label) => {
                    let (_, at) = positions.iter().find(|(l, _)| *l == label)?;
                    u8::try_from(at.checked_sub(here + 1)?).ok()
                }
            }
        };
        match op {
            Op::At(_) => {}
            Op::Stmt(code, k) => out.push(sock_filter {
                code: *code,
                jt: 0,
                jf: 0,
                k: *k,
            }),
            Op::Jump(code, k, t, f) => out.push(sock_filter {
                code: *code,
                jt: offset(*t)?,
                jf: offset(*f)?,
                k: *k,
            }),
        }
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

    /// A classic-BPF interpreter for the instructions the filter uses.
    fn run(program: &[sock_filter], arch: u32, nr: libc::c_long, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as u32).to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let ins = program[pc];
            pc += 1;
            match ins.code {
                LD => {
                    let k = ins.k as usize;
                    acc = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                }
                AND => acc &= ins.k,
                RET => return ins.k,
                JEQ | JGE | JSET => {
                    let taken = match ins.code {
                        JEQ => acc == ins.k,
                        JGE => acc >= ins.k,
                        _ => acc & ins.k != 0,
                    };
                    pc += usize::from(if taken { ins.jt } else { ins.jf });
                }
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    fn socket(program: &[sock_filter], domain: i32, ty: i32, proto: i32) -> u32 {
        let arch = AUDIT_ARCH.unwrap();
        run(
            program,
            arch,
            libc::SYS_socket,
            [domain as u64, ty as u64, proto as u64, 0, 0, 0],
        )
    }

    #[test]
    fn sockets_other_than_unix_and_tcp_are_refused() {
        let p = program(false, KILL).unwrap();
        let (allow, deny) = (libc::SECCOMP_RET_ALLOW, deny());
        assert_eq!(socket(&p, libc::AF_UNIX, libc::SOCK_DGRAM, 0), allow);
        assert_eq!(socket(&p, libc::AF_INET, libc::SOCK_STREAM, 0), allow);
        let cloexec = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
        assert_eq!(
            socket(&p, libc::AF_INET6, cloexec, libc::IPPROTO_TCP),
            allow
        );
        assert_eq!(socket(&p, libc::AF_INET, libc::SOCK_DGRAM, 0), deny);
        assert_eq!(
            socket(&p, libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_ICMP),
            deny
        );
        assert_eq!(socket(&p, libc::AF_INET, libc::SOCK_RAW, 1), deny);
        assert_eq!(
            socket(&p, libc::AF_INET, libc::SOCK_STREAM, 262),
            deny,
            "MPTCP"
        );
        assert_eq!(
            socket(&p, libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_SCTP),
            deny
        );
        assert_eq!(socket(&p, libc::AF_NETLINK, libc::SOCK_RAW, 0), deny);
        assert_eq!(socket(&p, libc::AF_PACKET, libc::SOCK_RAW, 0), deny);

        let strict = program(true, KILL).unwrap();
        assert_eq!(socket(&strict, libc::AF_UNIX, libc::SOCK_STREAM, 0), allow);
        assert_eq!(socket(&strict, libc::AF_INET, libc::SOCK_STREAM, 0), deny);
    }

    #[test]
    fn fast_open_io_uring_and_foreign_arches_are_caught() {
        let p = program(false, KILL).unwrap();
        let arch = AUDIT_ARCH.unwrap();
        let fastopen = libc::MSG_FASTOPEN as u64;
        assert_eq!(
            run(&p, arch, libc::SYS_sendto, [3, 0, 1, fastopen, 0, 0]),
            deny()
        );
        assert_eq!(
            run(&p, arch, libc::SYS_sendto, [3, 0, 1, 0, 0, 0]),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run(&p, arch, libc::SYS_sendmsg, [3, 0, fastopen, 0, 0, 0]),
            deny()
        );
        assert_eq!(
            run(&p, arch, libc::SYS_sendmmsg, [3, 0, 1, fastopen, 0, 0]),
            deny()
        );
        assert_eq!(run(&p, arch, libc::SYS_io_uring_setup, [0; 6]), deny());
        assert_eq!(
            run(&p, arch, libc::SYS_getpid, [0; 6]),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(run(&p, 0x4000_0003, libc::SYS_getpid, [0; 6]), KILL, "i386");
        if let Some(bit) = X32_SYSCALL_BIT {
            let x32 = libc::SYS_socket | libc::c_long::from(bit as i32);
            assert_eq!(run(&p, arch, x32, [0; 6]), KILL, "x32");
        }
    }
}
