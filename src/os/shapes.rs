//! The shapes the systems' implementations share.

/// How `os::open_private` opens a file that only its owner may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Private {
    /// Created when missing, written at the end.
    Append,
    /// Created when missing, emptied when present.
    Truncate,
    /// Created, and refused when anything has the name already.
    CreateNew,
}

/// A wall-clock time in the system's time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalTime {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    /// The zone's short name where the system gives one (may be empty).
    pub zone: String,
}
