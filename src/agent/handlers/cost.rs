//! The cost quote of a session's usage (docs/extensions.md, "`_spindle/session/status`"): its totals
//! priced by the model's table, incomplete (never a silent 0) when a call
//! had no price.

use crate::acp::spindle::results::{CostQuote, CostTotals};
use crate::agent::common::models::Registry;
use crate::agent::common::spend::{round6, Spend};

/// `usage.costQuote` (EXTENSIONS §6): the session's totals (`usage` and
/// the cost so far) priced by the model's table; incomplete, never a
/// silent 0, when a call had no price.
pub(super) fn cost_quote<'a>(
    (usage, spent): (crate::provider::Usage, Spend),
    entry: Option<&'a crate::agent::common::models::ModelEntry>,
    registry: Option<&Registry>,
) -> CostQuote<'a> {
    let price = entry.and_then(|e| e.config.price.as_ref());
    let complete = price.is_some() && spent.unpriced_calls == 0;
    let local = entry
        .and_then(|e| registry.and_then(|r| r.config.providers.get(&e.provider)))
        .and_then(|p| p.base_url.as_deref())
        .is_some_and(|url| url.contains("://127.0.0.1") || url.contains("://localhost"));
    let billing = if price.is_none() && local {
        "free"
    } else {
        "per_token"
    };
    let Some(price) = price else {
        return CostQuote {
            currency: None,
            original_totals: None,
            valuation: "official_table",
            cost_complete: false,
            display_complete: false,
            display_status: "unknown",
            billing_mode: billing,
        };
    };
    let cached = usage.cached_tokens.min(usage.input_tokens);
    let per = |tokens: u64, rate: f64| round6(tokens as f64 * rate / 1e6);
    let input = per(usage.input_tokens - cached, price.input);
    let cached_input = per(cached, price.cached_input.unwrap_or(price.input));
    let reasoning = per(
        usage.reasoning_tokens.min(usage.output_tokens),
        price.output,
    );
    let output = per(
        usage.output_tokens - usage.reasoning_tokens.min(usage.output_tokens),
        price.output,
    );
    CostQuote {
        currency: Some(&price.currency),
        original_totals: Some(CostTotals {
            input,
            cached_input,
            output,
            reasoning,
            total: round6(spent.cost),
        }),
        valuation: "official_table",
        cost_complete: complete,
        display_complete: complete,
        display_status: if complete { "exact" } else { "estimate" },
        billing_mode: billing,
    }
}
