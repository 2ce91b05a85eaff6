//! Provider credentials held in memory only.
//!
//! A key in Spindle's own environment is readable by any process of the
//! same user through `/proc/<agent pid>/environ` — every command the user
//! approves, every command under `yolo` — whatever is removed from the
//! command's own environment. So at start, while the process has one
//! thread, the credential variables are taken out of the environment and
//! their values kept here; whoever needs a key asks [`var`]. And the agent
//! marks itself non-dumpable ([`guard_process`]), so a process of the same
//! user cannot read its memory, its environment or its descriptors either.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// Variables that hold model-provider credentials by convention.
pub(crate) const STANDARD: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_ORG_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "AZURE_OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "XAI_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "COHERE_API_KEY",
    "PERPLEXITY_API_KEY",
    "CEREBRAS_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
];

/// Values shorter than this are not keys: a variable is withdrawn for
/// holding a copy of a key only when the key is at least this long.
const MIN_KEY_LEN: usize = 8;

// Global: what was taken out of the environment, which is the process's
// too; set once while the process has one thread, read-only after.
static WITHDRAWN: OnceLock<BTreeMap<String, String>> = OnceLock::new();

/// Takes the credential variables — the standard names and `names` (the
/// config's `api_key_env`s), less `keep` (the config's `tools.pass_env`,
/// which the user wants commands to get) — out of this process's
/// environment, with every other variable holding a copy of one of their
/// values, and keeps the values for [`var`]. Call once, at start, while the
/// process has a single thread (changing the environment is not safe with
/// others running); later calls change nothing.
pub(crate) fn withdraw(names: &[String], keep: &[String]) {
    if WITHDRAWN.get().is_some() {
        return;
    }
    let keep: BTreeSet<&str> = keep.iter().map(String::as_str).collect();
    let names: BTreeSet<&str> = STANDARD
        .iter()
        .copied()
        .chain(names.iter().map(String::as_str))
        .filter(|name| !keep.contains(name))
        .collect();
    let mut kept = BTreeMap::new();
    for name in names {
        if name.is_empty() || name.contains(['=', '\0']) {
            continue;
        }
        if let Some(value) = std::env::var_os(name) {
            if let Ok(value) = value.into_string() {
                kept.insert(name.to_string(), value);
            }
            std::env::remove_var(name);
        }
    }
    let values: Vec<&str> = kept
        .values()
        .map(|value| value.trim())
        .filter(|value| value.len() >= MIN_KEY_LEN)
        .collect();
    let copies: Vec<_> = std::env::vars_os()
        .filter(|(name, value)| {
            !keep.contains(name.to_string_lossy().as_ref())
                && values.contains(&value.to_string_lossy().trim())
        })
        .map(|(name, _)| name)
        .collect();
    let mut gone: Vec<String> = kept.keys().cloned().collect();
    for name in copies {
        gone.push(name.to_string_lossy().into_owned());
        std::env::remove_var(name);
    }
    wipe_original(&gone);
    let _ = WITHDRAWN.set(kept);
}

/// Overwrites, with zeros, the strings `NAME=value` of `names` in the
/// environment block the process started with: `/proc/<pid>/environ`
/// shows that block as it is in memory, whatever was unset since. Only
/// strings nothing points to any more (unset just before) are touched.
#[cfg(target_os = "linux")]
fn wipe_original(names: &[String]) {
    if names.is_empty() {
        return;
    }
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // The fields after the command's name (which may hold spaces) start
    // with the state, field 3; env_start and env_end are fields 50 and 51.
    let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
        return;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let (Some(start), Some(end)) = (
        fields.get(47).and_then(|f| f.parse::<usize>().ok()),
        fields.get(48).and_then(|f| f.parse::<usize>().ok()),
    ) else {
        return;
    };
    if start == 0 || end <= start || end - start > 64 * 1024 * 1024 {
        return;
    }
    // SAFETY: [env_start, env_end) is the process's own environment block,
    // mapped writable at the top of the main thread's stack for the whole
    // life of the process, and this runs while the process has one thread.
    // Only the strings of variables just unset are written, which nothing
    // refers to any more (the environment array no longer holds them).
    let block = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    let mut at = 0;
    while at < block.len() {
        let length = block[at..]
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(block.len() - at);
        let entry = &block[at..at + length];
        let named = names.iter().any(|name| {
            entry.len() > name.len()
                && entry.starts_with(name.as_bytes())
                && entry[name.len()] == b'='
        });
        if named {
            block[at..at + length].fill(0);
        }
        at += length + 1;
    }
}

#[cfg(not(target_os = "linux"))]
fn wipe_original(_names: &[String]) {}

/// A credential variable's value: the one withdrawn at start, else the
/// environment's (for variables not withdrawn, and in processes that never
/// withdrew, such as tests).
pub(crate) fn var(name: &str) -> Option<String> {
    WITHDRAWN
        .get()
        .and_then(|kept| kept.get(name).cloned())
        .or_else(|| std::env::var(name).ok())
}

/// Marks this process non-dumpable: processes of the same user can then
/// neither attach to it nor read its `/proc/<pid>/` files (`environ`,
/// `mem`, `fd`, `cmdline` stay readable only by itself and by holders of
/// CAP_SYS_PTRACE). Children are not affected: `execve` resets the flag.
pub(crate) fn guard_process() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_DUMPABLE takes a plain integer and touches no
        // memory of ours.
        let done = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        if done != 0 {
            log::warn!(
                "cannot make the agent non-dumpable: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}
