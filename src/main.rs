//! The `spindle` command: everything is in the library; `cli::main`
//! parses the command line and chooses the exit code.

fn main() -> std::process::ExitCode {
    spindle::cli::main()
}
