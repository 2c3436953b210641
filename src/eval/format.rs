//! Numbers for people: rounded to significant digits, counts grouped by thousands. The JSON keeps full
//! precision; only the summary text and the page use these.

/// Significant digits of the numbers on the page and in the summary.
pub const SIGNIFICANT_DIGITS: usize = 3;

/// Below this magnitude (and at or above [`SCIENTIFIC_ABOVE`]) numbers are written as 1.23e-5.
const SCIENTIFIC_BELOW: f64 = 1e-3;
const SCIENTIFIC_ABOVE: f64 = 1e7;

/// `value` with [`SIGNIFICANT_DIGITS`] significant digits.
pub fn sig(value: f64) -> String {
    sig_digits(value, SIGNIFICANT_DIGITS)
}

/// `value` with `digits` significant digits: 0.0753, 12.6, 1440, 1.23e-5 (trailing zeros kept, they are
/// significant).
pub fn sig_digits(value: f64, digits: usize) -> String {
    if value == 0.0 {
        return "0".into();
    }
    if !value.is_finite() {
        return "–".into();
    }
    let digits = digits.max(1);
    let magnitude = value.abs();
    if !(SCIENTIFIC_BELOW..SCIENTIFIC_ABOVE).contains(&magnitude) {
        let text = format!("{:.*e}", digits - 1, value);
        return text;
    }
    let exponent = magnitude.log10().floor() as i32;
    let decimals = (digits as i32 - 1 - exponent).max(0) as usize;
    let text = format!("{value:.decimals$}");
    // Rounding up can add a digit (0.09996 → 0.1000): drop the extra trailing zero it leaves.
    let rounded_exponent = text.trim_start_matches('-').parse::<f64>().map_or(exponent, |r| r.log10().floor() as i32);
    if rounded_exponent > exponent && decimals > 0 {
        format!("{value:.*}", decimals - 1)
    } else {
        text
    }
}

/// A count with its thousands grouped by narrow no-break spaces: 327 346.
pub fn count(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(digit);
    }
    out
}

/// "a ± b" with both at [`SIGNIFICANT_DIGITS`].
pub fn plus_minus(value: f64, spread: f64) -> String {
    format!("{} ± {}", sig(value), sig(spread))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits_and_groups() {
        assert_eq!(sig(0.075_341), "0.0753");
        assert_eq!(sig(12.63), "12.6");
        assert_eq!(sig(1440.0), "1440");
        assert_eq!(sig(-2.004), "-2.00");
        assert_eq!(sig(0.099_96), "0.100");
        assert_eq!(sig(1.234e-5), "1.23e-5");
        assert_eq!(sig(0.0), "0");
        assert_eq!(sig(f64::NAN), "–");
        assert_eq!(sig(3.0e9), "3.00e9");
        assert_eq!(count(327_346), "327\u{202f}346");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_000_000), "1\u{202f}000\u{202f}000");
        assert_eq!(plus_minus(0.5, 0.01234), "0.500 ± 0.0123");
    }
}
