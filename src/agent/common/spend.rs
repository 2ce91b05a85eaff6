//! What model calls cost, without pretending: a call's cost is what the
//! provider reported for it (a gateway's `usage.cost` or cost header, in
//! USD), else its tokens at the model's price (the config's, else the
//! catalog's), else unknown. A sum keeps the known part and counts the
//! unknown calls; it has a total only when no call was unknown, so an
//! unknown never reads as free and a part never reads as the whole.

use crate::config::Price;
use crate::provider::Usage;
use serde::{Deserialize, Serialize};

/// The cost of some model calls (a turn's, a session's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Spend {
    /// The sum of the calls whose cost is known.
    #[serde(default)]
    pub cost: f64,
    /// Calls whose cost is known.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priced_calls: u64,
    /// Calls whose cost is unknown (no report, no price, or no usage to
    /// price).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unpriced_calls: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl Spend {
    /// Counts one call, of known cost or not.
    pub(crate) fn add_call(&mut self, cost: Option<f64>) {
        match cost {
            Some(cost) => {
                self.cost += cost;
                self.priced_calls += 1;
            }
            None => self.unpriced_calls += 1,
        }
    }

    /// Adds another sum.
    pub(crate) fn add(&mut self, other: &Spend) {
        self.cost += other.cost;
        self.priced_calls += other.priced_calls;
        self.unpriced_calls += other.unpriced_calls;
    }

    /// What was added since `before` (a sum this one started from).
    pub(crate) fn since(&self, before: &Spend) -> Spend {
        Spend {
            cost: (self.cost - before.cost).max(0.0),
            priced_calls: self.priced_calls.saturating_sub(before.priced_calls),
            unpriced_calls: self.unpriced_calls.saturating_sub(before.unpriced_calls),
        }
    }

    /// The total, rounded to a millionth: `None` when any call's cost is
    /// unknown (the known part is then a floor, not the total).
    pub(crate) fn total(&self) -> Option<f64> {
        (self.unpriced_calls == 0).then(|| round6(self.cost))
    }
}

/// Rounds to a millionth (of a currency unit).
pub(crate) fn round6(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}

/// The currency the costs of a model are in: its price's, else USD (the
/// currency providers report costs in).
pub(crate) fn currency(price: Option<&Price>) -> &str {
    price.map_or("USD", |price| price.currency.as_str())
}

/// What one model call cost: the provider's report (USD) when it gave one
/// and the model's price, if any, is in USD too; else its usage at the
/// model's price; else unknown.
pub(crate) fn call_cost(
    reported: Option<f64>,
    usage: Option<&Usage>,
    price: Option<&Price>,
) -> Option<f64> {
    let usd = price.is_none_or(|price| price.currency.eq_ignore_ascii_case("USD"));
    match (reported, usage, price) {
        (Some(cost), _, _) if usd => Some(cost),
        (_, Some(usage), Some(price)) => Some(cost_of(usage, price)),
        _ => None,
    }
}

/// The price of one model call's tokens.
pub(crate) fn cost_of(usage: &Usage, price: &Price) -> f64 {
    let cached = usage.cached_tokens.min(usage.input_tokens) as f64;
    let fresh = usage.input_tokens as f64 - cached;
    let cached_price = price.cached_input.unwrap_or(price.input);
    (fresh * price.input + cached * cached_price + usage.output_tokens as f64 * price.output)
        / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(currency: &str) -> Price {
        Price {
            input: 2.0,
            output: 8.0,
            cached_input: Some(0.5),
            currency: currency.into(),
        }
    }

    fn usage() -> Usage {
        Usage {
            input_tokens: 1000,
            output_tokens: 100,
            cached_tokens: 400,
            ..Usage::default()
        }
    }

    #[test]
    fn the_providers_report_wins_then_the_price_then_unknown() {
        let usd = price("USD");
        // 600 × 2 + 400 × 0.5 + 100 × 8 = 2200 per million
        let priced = call_cost(None, Some(&usage()), Some(&usd)).unwrap();
        assert!((priced - 0.0022).abs() < 1e-12, "{priced}");
        assert_eq!(call_cost(Some(0.5), Some(&usage()), Some(&usd)), Some(0.5));
        assert_eq!(call_cost(Some(0.5), None, None), Some(0.5));
        assert_eq!(call_cost(Some(0.0), None, None), Some(0.0), "free is known");
        assert_eq!(call_cost(None, Some(&usage()), None), None);
        assert_eq!(
            call_cost(None, None, Some(&usd)),
            None,
            "no tokens to price"
        );
        // A USD report is not mixed into a price in another currency.
        let eur = price("EUR");
        let in_eur = call_cost(Some(0.5), Some(&usage()), Some(&eur)).unwrap();
        assert!((in_eur - 0.0022).abs() < 1e-12, "{in_eur}");
        assert_eq!(call_cost(Some(0.5), None, Some(&eur)), None);
    }

    #[test]
    fn one_unknown_call_makes_the_total_unknown() {
        let mut spend = Spend::default();
        assert_eq!(spend.total(), Some(0.0), "nothing spent is known");
        spend.add_call(Some(0.25));
        spend.add_call(Some(0.5));
        assert_eq!(spend.total(), Some(0.75));
        let before = spend;
        spend.add_call(None);
        assert_eq!(spend.total(), None);
        assert_eq!(
            (spend.cost, spend.priced_calls, spend.unpriced_calls),
            (0.75, 2, 1)
        );
        let since = spend.since(&before);
        assert_eq!(
            (since.cost, since.priced_calls, since.unpriced_calls),
            (0.0, 0, 1)
        );
        let mut sum = Spend::default();
        sum.add(&since);
        assert_eq!(sum.total(), None);
        // Stored sums load, old ones (a bare cost) too.
        let stored: Spend = serde_json::from_value(serde_json::json!({"cost": 1.5})).unwrap();
        assert_eq!(stored.total(), Some(1.5));
        let back: Spend = serde_json::from_value(serde_json::to_value(spend).unwrap()).unwrap();
        assert_eq!(back, spend);
    }
}
