//! Figure 5: the size of the release binary.

use crate::report::{group, Row};
use crate::workspace::Bench;
use crate::MIB;

/// Target.
const TARGET_BINARY_MIB: f64 = 6.0;

/// Figure 5: reads the binary's size, prints it and adds its row.
pub(crate) fn report_size(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!("## 5. Release binary size");
    match std::fs::metadata(&bench.binary) {
        Ok(meta) => {
            let bytes = meta.len();
            let mib = bytes as f64 / MIB;
            println!(
                "  {} bytes = {mib:.2} MiB ({:.2} MB decimal)",
                group(bytes),
                bytes as f64 / 1e6
            );
            rows.push(Row::lower(
                "release binary size",
                format!("{} bytes ({mib:.2} MiB)", group(bytes)),
                mib,
                TARGET_BINARY_MIB,
                "MiB",
            ));
        }
        Err(err) => {
            *failed = true;
            let err = err.to_string();
            println!("  FAILED: {err}");
            rows.push(Row::failed("release binary size", &err, "< 4 MiB"));
        }
    }
}
