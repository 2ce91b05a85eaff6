//! `exec`'s budgets: `--max-cost USD`, `--max-steps N`, `--max-minutes M`.
//! The steps are the agent's own limit (the turn ends `max_turn_requests`);
//! the minutes are a clock that cancels the turn as Ctrl-C does; the cost
//! is watched here: after each model call that reported usage and each
//! tool call shown, exec asks the agent for the session's status and
//! cancels the turn once what this run spent reaches the budget. A cost
//! that cannot be known (a call with no price and none reported) ends
//! the run too: a budget that cannot be kept is not silently ignored.
//! A run a budget ended exits with 4 (`Failure::OverBudget`).

use super::failure::Failure;
use super::link::Sender;
use super::printer::Printer;
use serde_json::{json, Value};
use std::time::Duration;

/// The most US dollars `--max-cost` takes.
const MOST_COST: f64 = 100_000.0;
/// The most minutes `--max-minutes` takes: a week.
const MOST_MINUTES: f64 = 7.0 * 24.0 * 60.0;
/// The most model calls `--max-steps` takes.
pub(super) const MOST_STEPS: usize = 100_000;

/// The budgets given on exec's command line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Budgets {
    /// US dollars this run may spend on model calls.
    pub cost: Option<f64>,
    /// `--max-steps` as given to exec (the agent's limit is set too).
    pub steps: Option<usize>,
    /// Minutes the run may take.
    pub minutes: Option<f64>,
}

/// The budget that ended a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Ran {
    /// What the run spent (USD) reached the budget; `None`: the cost
    /// became unknown.
    Cost(Option<f64>),
    Steps,
    Minutes,
}

impl Ran {
    /// Its name in the result line and in `Failure::OverBudget`.
    pub(super) fn name(self) -> &'static str {
        match self {
            Ran::Cost(_) => "cost",
            Ran::Steps => "steps",
            Ran::Minutes => "minutes",
        }
    }

    /// What stderr says of it.
    pub(super) fn words(self, budgets: &Budgets) -> String {
        match self {
            Ran::Cost(Some(spent)) => format!(
                "the --max-cost budget of {} ran out ({} spent); the turn was stopped",
                dollars(budgets.cost.unwrap_or_default()),
                dollars(spent)
            ),
            Ran::Cost(None) => "--max-cost cannot be kept: the cost of a model call is unknown (the model has no price in the config, and the provider reported none); the turn was stopped. Give the model a price (docs/configuration.md) or run without --max-cost".to_string(),
            Ran::Steps => format!(
                "the --max-steps budget of {} ran out; the turn was stopped",
                crate::util::count(budgets.steps.unwrap_or_default(), "model call", "model calls")
            ),
            Ran::Minutes => format!(
                "the --max-minutes budget of {} minutes ran out; the turn was stopped",
                budgets.minutes.unwrap_or_default()
            ),
        }
    }
}

fn dollars(amount: f64) -> String {
    format!("${amount:.4}")
}

/// A positive amount of US dollars for `--max-cost`.
pub(super) fn parse_cost(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 && usd <= MOST_COST => Ok(usd),
        _ => Err(format!(
            "--max-cost takes an amount of US dollars above 0 and at most {MOST_COST}, like 0.50; got '{value}'"
        )),
    }
}

/// A positive number of minutes for `--max-minutes` (fractions too).
pub(super) fn parse_minutes(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(minutes) if minutes.is_finite() && minutes > 0.0 && minutes <= MOST_MINUTES => {
            Ok(minutes)
        }
        _ => Err(format!(
            "--max-minutes takes a number of minutes above 0 and at most {MOST_MINUTES} (a week), like 30 or 0.5; got '{value}'"
        )),
    }
}

impl Budgets {
    /// The clock's limit, if any.
    pub(super) fn duration(&self) -> Option<Duration> {
        self.minutes.map(|m| Duration::from_secs_f64(m * 60.0))
    }
}

/// Starts the clock of `--max-minutes`: `ran_out` runs when `limit`
/// passes before the returned sender is dropped (as the turn ends).
pub(super) fn start_clock(
    limit: Duration,
    ran_out: impl FnOnce() + Send + 'static,
) -> Option<crossbeam_channel::Sender<()>> {
    let (done, ended) = crossbeam_channel::bounded::<()>(0);
    std::thread::Builder::new()
        .name("spindle-exec-clock".into())
        .spawn(move || {
            if ended.recv_timeout(limit) == Err(crossbeam_channel::RecvTimeoutError::Timeout) {
                ran_out();
            }
        })
        .ok()?;
    Some(done)
}

/// `--max-cost` at work: after each model call that reported usage and
/// each tool call shown, the session's status is asked for (an answer
/// [`CostWatch::answered`] reads); once what the run spent reaches the
/// budget, or cannot be known, the turn is cancelled.
pub(super) struct CostWatch {
    max: f64,
    /// The session's cost before this run (USD).
    before: f64,
    to: Sender,
    session: String,
    asked: u64,
    /// Set once the budget ended the run.
    pub ran_out: Option<Ran>,
}

impl CostWatch {
    /// `before`: what the session had cost in USD when the run began.
    pub(super) fn new(max: f64, before: f64, to: Sender, session: &str) -> CostWatch {
        CostWatch {
            max,
            before,
            to,
            session: session.to_string(),
            asked: 0,
            ran_out: None,
        }
    }

    /// An update of the turn went by.
    pub(super) fn seen(&mut self, update: &Value) {
        let spent_more = matches!(
            update["sessionUpdate"].as_str(),
            Some("usage_update" | "tool_call")
        );
        if !spent_more || self.ran_out.is_some() {
            return;
        }
        self.asked += 1;
        let request = json!({"jsonrpc": "2.0", "id": format!("budget-{}", self.asked),
            "method": "_spindle/session/status", "params": {"sessionId": self.session}});
        super::link::send(&self.to, &request);
    }

    /// An answer to a request of exec's own: the status it asked for.
    pub(super) fn answered(&mut self, message: &Value) {
        let ours = message["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("budget-"));
        let Some(result) = message.get("result").filter(|_| ours) else {
            return;
        };
        if self.ran_out.is_some() {
            return;
        }
        let known = &result["usage"]["cost"];
        let spent = match (known["amount"].as_f64(), known["currency"].as_str()) {
            (Some(amount), Some("USD")) => Some((amount - self.before).max(0.0)),
            _ => None,
        };
        if spent.is_none_or(|spent| spent >= self.max) {
            self.ran_out = Some(Ran::Cost(spent));
            super::ending::cancel(&self.to, &self.session);
        }
    }
}

/// What the session had cost in US dollars before this run (`before`,
/// in `currency`), for `--max-cost`: a cost not counted in
/// dollars, or unknown already, cannot be kept to, which is said before
/// any turn starts.
pub(super) fn spent_before(
    printer: &mut Printer,
    before: Option<f64>,
    currency: &str,
) -> Result<f64, Failure> {
    let refused = |printer: &mut Printer, why: String| {
        printer.finish();
        Err(Failure::Failed(format!("--max-cost cannot be kept: {why}")))
    };
    if currency != "USD" {
        return refused(printer, format!(
            "it counts US dollars, and this model's price is in {}; give the model a price in USD (docs/configuration.md) or run without --max-cost",
            crate::util::visible(currency, false)
        ));
    }
    match before {
        Some(before) => Ok(before),
        None => refused(printer, "what this session cost so far is unknown (a model call without a price); start a new session, or run without --max-cost".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_take_positive_bounded_numbers_only() {
        assert_eq!(parse_cost("0.5"), Ok(0.5));
        assert_eq!(parse_minutes("0.02"), Ok(0.02));
        for bad in ["0", "-1", "NaN", "inf", "abc", "", "1e300", "100001"] {
            let said = parse_cost(bad).unwrap_err();
            assert!(said.contains("--max-cost takes"), "{bad}: {said}");
        }
        for bad in ["0", "-0.5", "nan", "infinity", "x", "10081", "1e20"] {
            let said = parse_minutes(bad).unwrap_err();
            assert!(said.contains("--max-minutes takes"), "{bad}: {said}");
        }
    }
}
