//! Numbers and the summary table: `Stats` over samples, the table's `Row`s
//! and their printing, and number and text formatting.

pub(crate) struct Stats {
    pub(crate) min: f64,
    pub(crate) median: f64,
    pub(crate) p90: f64,
    pub(crate) max: f64,
}

impl Stats {
    pub(crate) fn of(samples: &[f64]) -> Stats {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        if n == 0 {
            return Stats {
                min: f64::NAN,
                median: f64::NAN,
                p90: f64::NAN,
                max: f64::NAN,
            };
        }
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        // Nearest rank.
        let rank = ((0.9 * n as f64).ceil() as usize).clamp(1, n);
        Stats {
            min: sorted[0],
            median,
            p90: sorted[rank - 1],
            max: sorted[n - 1],
        }
    }

    pub(crate) fn describe_ms(&self) -> String {
        format!(
            "median {:.3} ms   p90 {:.3} ms   min {:.3} ms   max {:.3} ms",
            self.median * 1e3,
            self.p90 * 1e3,
            self.min * 1e3,
            self.max * 1e3
        )
    }
}

pub(crate) struct Row {
    figure: String,
    value: String,
    target: String,
    met: String,
}

impl Row {
    /// A figure that must stay below `target`.
    pub(crate) fn lower(
        figure: &str,
        value: String,
        measured: f64,
        target: f64,
        unit: &str,
    ) -> Row {
        Row {
            figure: figure.into(),
            value,
            target: format!("< {target} {unit}"),
            met: yes_no(measured < target),
        }
    }

    /// A figure that must exceed `target`.
    pub(crate) fn higher(
        figure: &str,
        value: String,
        measured: f64,
        target: f64,
        unit: &str,
    ) -> Row {
        Row {
            figure: figure.into(),
            value,
            target: format!("> {} {unit}", group(target as u64)),
            met: yes_no(measured > target),
        }
    }

    /// A figure measured against a target written out in `target` (one of
    /// the benchmark's own suggestion says so there).
    pub(crate) fn suggested(figure: &str, value: String, met: bool, target: &str) -> Row {
        Row {
            figure: figure.into(),
            value,
            target: target.into(),
            met: yes_no(met),
        }
    }

    pub(crate) fn info(figure: &str, value: String) -> Row {
        Row {
            figure: figure.into(),
            value,
            target: "-".into(),
            met: "-".into(),
        }
    }

    pub(crate) fn failed(figure: &str, error: &str, target: &str) -> Row {
        let first_line = error.lines().next().unwrap_or_default().replace('|', "/");
        Row {
            figure: figure.into(),
            value: format!("FAILED: {first_line}"),
            target: target.into(),
            met: "no".into(),
        }
    }
}

fn yes_no(met: bool) -> String {
    if met { "yes" } else { "NO" }.to_string()
}

/// 1234567 -> "1,234,567".
pub(crate) fn group(number: u64) -> String {
    let digits = number.to_string();
    let lead = match digits.len() % 3 {
        0 => 3,
        lead => lead,
    };
    let (first, rest) = digits.split_at(lead.min(digits.len()));
    let mut out = first.to_string();
    for triple in rest.as_bytes().chunks(3) {
        out.push(',');
        out.push_str(std::str::from_utf8(triple).unwrap_or_default());
    }
    out
}

/// `text` on one line, cut to `limit` characters.
pub(crate) fn one_line(text: &str, limit: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > limit {
        let cut: String = flat.chars().take(limit).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// Prints the summary table of all figures.
pub(crate) fn print_summary(rows: &[Row]) {
    println!("## Summary");
    println!();
    println!("| figure | value | target | met |");
    println!("|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} |",
            row.figure, row.value, row.target, row.met
        );
    }
}
