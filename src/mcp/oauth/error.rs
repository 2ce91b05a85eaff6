//! Why a sign-in, a refresh or a token file operation failed.

/// Which step of a sign-in failed, for a caller that acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OAuthErrorKind {
    /// The server's or the authorization server's metadata: missing,
    /// unreadable or naming an endpoint Spindle refuses.
    Discovery,
    /// Registering Spindle as a client was refused or impossible.
    Registration,
    /// The local listener, or the browser's answer to it.
    Callback,
    /// The user (or a shutdown) stopped the sign-in.
    Cancelled,
    /// The browser did not come back in time.
    TimedOut,
    /// The token endpoint refused or gave no usable token.
    Token,
    /// The token file could not be written or removed.
    Storage,
}

/// Why a sign-in, a refresh or a token file operation failed; the
/// message names no token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OAuthError {
    pub(crate) kind: OAuthErrorKind,
    message: String,
}

impl OAuthError {
    pub(crate) fn new(kind: OAuthErrorKind, message: impl Into<String>) -> OAuthError {
        OAuthError {
            kind,
            message: message.into(),
        }
    }

    pub(super) fn wrap(kind: OAuthErrorKind) -> impl Fn(String) -> OAuthError {
        move |message| OAuthError::new(kind, message)
    }
}

impl std::fmt::Display for OAuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OAuthError {}

impl From<OAuthError> for String {
    fn from(error: OAuthError) -> String {
        error.message
    }
}
