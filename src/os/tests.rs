use super::*;
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spindle-os-{name}-{}", crate::util::random_hex()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_link_at_the_name_is_refused_and_its_target_untouched() {
    let dir = scratch("link");
    let target = dir.join("target");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.join("link");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&target, &link).unwrap();
    #[cfg(windows)]
    if std::os::windows::fs::symlink_file(&target, &link).is_err() {
        // Making links needs a privilege or developer mode on Windows.
        return;
    }
    for how in [Private::Append, Private::Truncate] {
        let error = open_private(&link, how).unwrap_err();
        assert!(is_link_refused(&error), "{how:?}: {error}");
    }
    assert!(open_private(&link, Private::CreateNew).is_err());
    assert!(is_link_refused(&open_read(&link, false).unwrap_err()));
    assert!(open_read(&link, true).is_ok());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn private_files_are_private_and_counted() {
    let dir = scratch("private");
    let path = dir.join("key");
    let file = open_private(&path, Private::CreateNew).unwrap();
    assert!(open_private(&path, Private::CreateNew).is_err(), "exists");
    let meta = file.metadata().unwrap();
    assert!(owned_by_me(&meta));
    assert_eq!(link_count(&file).unwrap(), 1);
    assert_eq!(link_count_at(&path).unwrap(), 1);
    std::fs::hard_link(&path, dir.join("second")).unwrap();
    assert_eq!(link_count_at(&path).unwrap(), 2);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        make_private(&std::fs::File::open(&path).unwrap()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let folder = dir.join("a/b");
        create_private_dir_all(&folder).unwrap();
        let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }
    // An open file cannot be removed on Windows.
    drop(file);
    std::fs::remove_dir_all(dir).unwrap();
}

#[cfg(unix)]
#[test]
fn opening_a_fifo_for_reading_does_not_block() {
    let dir = scratch("fifo");
    let fifo = dir.join("pipe");
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let file = open_read(&fifo, false).unwrap();
    assert!(!file.metadata().unwrap().is_file());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_stamp_changes_with_a_write_and_local_time_reads_back() {
    let dir = scratch("stamp");
    let path = dir.join("f");
    std::fs::write(&path, "one").unwrap();
    let first = change_stamp(&std::fs::metadata(&path).unwrap());
    std::fs::remove_file(&path).unwrap();
    std::fs::write(dir.join("other"), "x").unwrap();
    std::fs::write(&path, "two").unwrap();
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(86_400))
        .unwrap();
    let second = change_stamp(&std::fs::metadata(&path).unwrap());
    assert_ne!(first, second);
    assert_eq!(second.0, 86_400 * 1_000_000_000);
    // 2026-06-15 12:00 UTC is that day, or the day before or after, in
    // any zone.
    let time = local_time(1_781_524_800).unwrap();
    assert_eq!((time.year, time.month), (2026, 6));
    assert!((14..=16).contains(&time.day), "{time:?}");
    assert!(time.hour < 24 && time.minute < 60);
    drop(file);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Private files and folders admit the current user alone (a protected
/// access list), whether made so at creation or afterwards.
#[cfg(windows)]
#[test]
fn private_files_and_folders_admit_only_their_user() {
    use std::os::windows::fs::OpenOptionsExt;
    let dir = scratch("acl");
    let created = open_private(&dir.join("new"), Private::CreateNew).unwrap();
    assert!(sys::is_private(&created).unwrap());
    std::fs::write(dir.join("plain"), "x").unwrap();
    let plain = std::fs::File::open(dir.join("plain")).unwrap();
    assert!(
        !sys::is_private(&plain).unwrap(),
        "inherits the folder's list"
    );
    make_private(&plain).unwrap();
    assert!(sys::is_private(&plain).unwrap());
    let folder = dir.join("a/b");
    create_private_dir_all(&folder).unwrap();
    for made in [dir.join("a"), folder] {
        let handle = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(0x0200_0000) // FILE_FLAG_BACKUP_SEMANTICS: a folder
            .open(&made)
            .unwrap();
        assert!(sys::is_private(&handle).unwrap(), "{}", made.display());
    }
    drop((created, plain));
    std::fs::remove_dir_all(dir).unwrap();
}
