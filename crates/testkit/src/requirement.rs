//! The one skip policy for tests that need something from outside the repository (Node 22, an npm
//! reference server, the TypeScript SDK, Python's `mcp`, tmux, a kernel feature): a lookup says
//! what it found or why it is [`Missing`], and the test takes the answer through
//! [`require_or_skip!`](crate::require_or_skip). On a developer's machine a missing tool skips the
//! test with the reason printed; in CI (`CI` set) it fails the test with the reason, so a broken CI
//! setup never passes as a run of silent skips.

use std::ffi::OsStr;

/// Why something a test needs is not here, with what to run to install it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Missing {
    reason: String,
}

impl Missing {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }

    /// `Ok(())` when `available`, else [`Missing`] with `reason`.
    pub fn unless(available: bool, reason: impl FnOnce() -> String) -> Result<(), Self> {
        if available {
            Ok(())
        } else {
            Err(Self::new(reason()))
        }
    }

    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Takes what a lookup found, or ends the test when it is [`Missing`]: the test is skipped (returns
/// early, reason printed) outside CI and fails with the reason when `CI` is set.
///
/// ```no_run
/// # async fn a_test() {
/// let node = warden_testkit::require_or_skip!(warden_testkit::node22());
/// # let _ = node;
/// # }
/// ```
#[macro_export]
macro_rules! require_or_skip {
    ($lookup:expr) => {
        match $lookup {
            ::std::result::Result::Ok(found) => found,
            ::std::result::Result::Err(missing) => {
                $crate::requirement::skip_or_fail(&missing);
                return;
            }
        }
    };
}

/// Whether this process runs in CI: `CI` set to anything but empty, `0` or `false`.
pub fn running_in_ci() -> bool {
    ci_value_means_ci(std::env::var_os("CI").as_deref())
}

fn ci_value_means_ci(value: Option<&OsStr>) -> bool {
    value.is_some_and(|value| !value.is_empty() && value != "0" && value != "false")
}

/// What [`require_or_skip!`](crate::require_or_skip) does with a [`Missing`]: panics in CI, prints
/// `skipped TEST: reason` elsewhere (the test then returns).
pub fn skip_or_fail(missing: &Missing) {
    skip_or_fail_in(missing, running_in_ci());
}

fn skip_or_fail_in(missing: &Missing, in_ci: bool) {
    let current = std::thread::current();
    let test = current.name().unwrap_or("this test");
    if in_ci {
        panic!(
            "{test} needs something that is missing in CI (CI is set, so it may not skip): {missing}"
        );
    }
    eprintln!("skipped {test}: {missing}");
}

/// The program `program` from PATH, when it answers `probe_args` with success.
pub fn command_on_path(program: &str, probe_args: &[&str], hint: &str) -> Result<(), Missing> {
    let answers = std::process::Command::new(program)
        .args(probe_args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    Missing::unless(answers, || format!("`{program}` is not installed: {hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_is_any_value_but_empty_zero_or_false() {
        assert!(ci_value_means_ci(Some(OsStr::new("true"))));
        assert!(ci_value_means_ci(Some(OsStr::new("1"))));
        assert!(!ci_value_means_ci(Some(OsStr::new(""))));
        assert!(!ci_value_means_ci(Some(OsStr::new("0"))));
        assert!(!ci_value_means_ci(Some(OsStr::new("false"))));
        assert!(!ci_value_means_ci(None));
    }

    #[test]
    #[should_panic(expected = "may not skip): tmux is gone")]
    fn a_missing_tool_fails_in_ci() {
        skip_or_fail_in(&Missing::new("tmux is gone"), true);
    }

    fn lookup(found: bool) -> Result<u8, Missing> {
        if found {
            Ok(7)
        } else {
            Err(Missing::new("not here"))
        }
    }

    /// The macro's early return, seen from outside: `reached` stays `None` after a skip.
    fn take(found: bool, reached: &mut Option<u8>) {
        let value = crate::require_or_skip!(lookup(found));
        *reached = Some(value);
    }

    #[test]
    fn the_macro_yields_what_was_found_and_otherwise_skips_or_fails() {
        let mut reached = None;
        take(true, &mut reached);
        assert_eq!(reached, Some(7));
        let missing = std::panic::catch_unwind(|| {
            let mut reached = None;
            take(false, &mut reached);
            reached
        });
        if running_in_ci() {
            assert!(missing.is_err(), "in CI a missing tool fails the test");
        } else {
            assert_eq!(
                missing.ok(),
                Some(None),
                "outside CI the test returns early"
            );
        }
    }

    #[test]
    fn a_program_that_is_not_installed_is_missing_with_its_hint() {
        let missing = command_on_path("warden-no-such-program", &["-V"], "install it").unwrap_err();
        assert_eq!(
            missing.reason(),
            "`warden-no-such-program` is not installed: install it"
        );
        assert!(command_on_path("sh", &["-c", "exit 0"], "").is_ok());
    }
}
