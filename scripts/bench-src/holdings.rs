//! What an agent process holds, read from `/proc/PID/smaps`: resident
//! memory split into the agent's own image (its code and data, read from
//! the binary), the shared libraries' images, and anonymous memory (the
//! heap, the allocator's arenas, thread stacks). The images are pages of
//! files the kernel maps in as code runs (in blocks, not page by page):
//! they count in `VmHWM` like the heap does.

const KIB: f64 = 1024.0;

#[derive(Clone, Copy, Default)]
pub(crate) struct Holdings {
    /// Resident pages of the agent's binary: code (`r-x`), read-only data
    /// (`r--`), and its written data (`rw-`).
    pub(crate) own_code_kib: u64,
    pub(crate) own_data_kib: u64,
    /// Resident pages of other files: shared libraries, the database's
    /// shared-memory index.
    pub(crate) libraries_kib: u64,
    /// Anonymous memory: the heap and arenas, thread stacks, the dynamic
    /// loader's and the C library's own.
    pub(crate) anonymous_kib: u64,
    pub(crate) threads: u64,
}

impl Holdings {
    pub(crate) fn total_kib(&self) -> u64 {
        self.own_code_kib + self.own_data_kib + self.libraries_kib + self.anonymous_kib
    }

    /// One line: each part in MiB and the threads.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{:.2} MiB = code of the binary {:.2} + its data {:.2} + shared libraries {:.2} + anonymous (heap, arenas, stacks) {:.2}; {} threads",
            self.total_kib() as f64 / KIB,
            self.own_code_kib as f64 / KIB,
            self.own_data_kib as f64 / KIB,
            self.libraries_kib as f64 / KIB,
            self.anonymous_kib as f64 / KIB,
            self.threads
        )
    }
}

/// Reads the holdings of process `pid`, whose executable is `binary`.
pub(crate) fn of(pid: u32, binary: &std::path::Path) -> Result<Holdings, String> {
    let path = format!("/proc/{pid}/smaps");
    let smaps = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let own = binary.to_string_lossy();
    let mut holdings = Holdings::default();
    // What the current mapping is: Some(true) the binary, Some(false)
    // another file, None anonymous; and whether it is executable.
    let mut file: Option<bool> = None;
    let mut code = false;
    for line in smaps.lines() {
        if let Some((range, rest)) = line.split_once(' ') {
            if range.contains('-') && range.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
                let fields: Vec<&str> = rest.split_whitespace().collect();
                let perms = fields.first().copied().unwrap_or("");
                let name = fields.get(4).copied().unwrap_or("");
                code = perms.contains('x');
                file = if name.starts_with('/') {
                    Some(name == own)
                } else {
                    None
                };
                continue;
            }
        }
        let Some(rss) = line.strip_prefix("Rss:") else {
            continue;
        };
        let kib: u64 = rss
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .unwrap_or(0);
        match (file, code) {
            (Some(true), true) => holdings.own_code_kib += kib,
            (Some(true), false) => holdings.own_data_kib += kib,
            (Some(false), _) => holdings.libraries_kib += kib,
            (None, _) => holdings.anonymous_kib += kib,
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    holdings.threads = status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    Ok(holdings)
}

/// Whether `binary` is dynamically linked: an ELF file with an interpreter
/// (`PT_INTERP`, the dynamic loader). `None` when it cannot be told.
pub(crate) fn is_dynamic(binary: &std::path::Path) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    let bytes = std::fs::read(binary).ok()?;
    if bytes.get(..5)? != b"\x7fELF\x02" {
        return None;
    }
    let u16_at = |at: usize| Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?));
    let table = usize::try_from(u64_at(0x20)?).ok()?;
    let size = usize::from(u16_at(0x36)?);
    let count = usize::from(u16_at(0x38)?);
    let mut dynamic = false;
    for n in 0..count {
        dynamic |= u32_at(table + n * size)? == PT_INTERP;
    }
    Some(dynamic)
}
