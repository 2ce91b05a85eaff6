//! How a command falls short, and so the exit code it ends with.

/// How a command fell short; it alone chooses the exit code (the help's
/// "Exit codes" line, and `exec`'s 3 and 4).
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// The command line is wrong: said with a hint at the help; 2.
    Usage(String),
    /// The command line names what is not there (a provider in
    /// `--model`): said without the hint; 2.
    Refused(String),
    /// The command could not do its work: `spindle: <message>`; 1.
    Failed(String),
    /// No model provider is set up (or none offers a model): what is
    /// wrong and the way to set one up; 1.
    NoModel(String),
    /// `spindle setup` could not: `spindle setup: <message>`; 1.
    SetupFailed(String),
    /// What is wrong was already said (the doctor's report, an error
    /// `exec` printed as it came), or there is nothing to add; 1.
    Broken,
    /// `exec`'s turn stopped for another reason than its end, said
    /// already; 3.
    Stopped,
    /// `exec`'s turn was ended by a budget of its command line
    /// (`"cost"`, `"steps"`, `"minutes"`), said already; 4.
    OverBudget(&'static str),
    /// Interrupted (Ctrl-C), said already; 130, as a shell reports it.
    Cancelled,
    /// Ended by a termination request (`SIGTERM`, …) after an orderly
    /// stop: `main` passes the signal on (a death by it, as a shell
    /// expects); 128 + its number where it cannot, 130 on Windows.
    Signalled(&'static str),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) | Failure::Refused(_) => 2,
            Failure::Failed(_)
            | Failure::NoModel(_)
            | Failure::SetupFailed(_)
            | Failure::Broken => 1,
            Failure::Stopped => 3,
            Failure::OverBudget(_) => 4,
            Failure::Cancelled => 130,
            Failure::Signalled(name) => crate::process::signal_exit_code(name),
        }
    }

    /// What stderr gets, if anything: a message may quote a file, a path
    /// or an argument, whose characters that act on a terminal are
    /// written out.
    pub(super) fn report(&self) {
        let visible = |message: &str| crate::util::visible(message, true);
        match self {
            Failure::Usage(message) => {
                eprintln!(
                    "spindle: {}\nRun 'spindle --help' for usage.",
                    visible(message)
                )
            }
            Failure::Refused(message) | Failure::Failed(message) | Failure::NoModel(message) => {
                eprintln!("spindle: {}", visible(message))
            }
            Failure::SetupFailed(message) => eprintln!("spindle setup: {}", visible(message)),
            Failure::Signalled(name) => eprintln!("spindle: ended by {name}"),
            Failure::Broken | Failure::Stopped | Failure::OverBudget(_) | Failure::Cancelled => {}
        }
    }
}
