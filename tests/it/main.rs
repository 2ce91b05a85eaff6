//! The single integration-test binary: every test module lives under
//! `tests/it/`, sharing the helpers in `support`.

mod protocol;
mod streaming;
mod support;
mod support_selftest;
mod tools;
