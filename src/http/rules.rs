//! The rules of the integration API's inputs, in one place: the checks the handlers make and
//! the patterns and bounds the OpenAPI document states for them (`openapi` reads them here;
//! a unit test checks that each pattern and its check agree).

/// Survey, run and tracking-key ids (`catalog::ids`): 24 hex characters, either case. Patterns
/// here are left open at the end and bounded by `maxLength` instead: a Python-dialect validator
/// (the fuzzer's) lets `$` match before a final newline, which the service refuses.
pub(crate) const HEX24_PATTERN: &str = "^[0-9a-fA-F]{24}";
/// External references (`ingest::batch::normalize_reference`): a UUID, hyphenated, either case.
pub(crate) const UUID_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
/// Browser-session identifiers (`ingest::batch::validate_identifier`).
pub(crate) const IDENTIFIER_PATTERN: &str = "^[A-Za-z0-9._:-]+$";
/// A survey name: not blank, at most 200 characters once trimmed of white space (Unicode's
/// \\t\\n\\u000B\\f\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000hite_Space, what `str::trim` removes, spelled out so that every regex dialect agrees), and
/// no NUL character (PostgreSQL's text cannot hold one).
pub(crate) const NAME_PATTERN: &str = concat!(
    "^[\\t\\n\\u000B\\f\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]*",
    "[^\\t\\n\\u000B\\f\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\u0000]",
    "(?:[^\\u0000]{0,198}",
    "[^\\t\\n\\u000B\\f\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\u0000])?",
    "[\\t\\n\\u000B\\f\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]*$"
);
/// An external survey id: 1 to 200 characters, no NUL.
pub(crate) const EXTERNAL_ID_PATTERN: &str = "^[^\\u0000]*$";

/// The longest external survey id and survey name, in characters.
pub(crate) const MAX_EXTERNAL_SURVEY_ID_CHARS: usize = 200;
pub(crate) const MAX_SURVEY_NAME_CHARS: usize = 200;
/// The most references one lookup takes.
pub(crate) const MAX_LOOKUP_REFERENCES: usize = 100;

/// An external survey id: 1 to 200 characters, no NUL ([`EXTERNAL_ID_PATTERN`] and the
/// parameter's bounds).
pub(crate) fn external_survey_id_is_valid(id: &str) -> bool {
    let chars = id.chars().count();
    (1..=MAX_EXTERNAL_SURVEY_ID_CHARS).contains(&chars) && !id.contains('\0')
}

/// A survey name as stored: trimmed of white space (Unicode's White_Space), 1 to 200
/// characters, no NUL (PostgreSQL's text cannot hold one). `None` for anything else. (The OpenAPI document spells this rule out as
/// a pattern: [`NAME_PATTERN`].)
pub(crate) fn survey_name(name: &str) -> Option<&str> {
    let name = name.trim();
    let chars = name.chars().count();
    ((1..=MAX_SURVEY_NAME_CHARS).contains(&chars) && !name.contains('\0')).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's name pattern and the handler's rule agree, on edge cases and on random
    /// strings over an alphabet of white space (Unicode's and a look-alike that is not) and
    /// letters.
    #[test]
    fn the_name_pattern_is_the_handlers_rule() {
        let pattern = regex::Regex::new(NAME_PATTERN).expect("the pattern compiles");
        let agree = |name: &str| {
            assert_eq!(
                pattern.is_match(name),
                survey_name(name).is_some(),
                "{name:?}"
            );
        };
        for name in [
            "",
            " ",
            "\u{a0}\u{3000}\u{85}",
            "a",
            " a ",
            "a b",
            "\u{feff}",
            "\t\nPanel\r\n",
            "a\u{0}b",
            "\u{0}",
            &"x".repeat(200),
            &"x".repeat(201),
            &format!("  {}  ", "y".repeat(200)),
            &format!(" {} ", "y".repeat(201)),
            &format!("a{}b", " ".repeat(198)),
            &format!("a{}b", " ".repeat(199)),
        ] {
            agree(name);
        }
        let alphabet = [
            ' ', '\t', '\n', '\u{a0}', '\u{2003}', '\u{feff}', '\u{200b}', '\u{0}', 'a', 'é', '漢',
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..5_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let length = (state % 260) as usize;
            let name: String = (0..length)
                .map(|index| {
                    let mixed = state.rotate_left(index as u32 % 64) ^ index as u64;
                    alphabet[(mixed % alphabet.len() as u64) as usize]
                })
                .collect();
            agree(&name);
        }
    }
}
