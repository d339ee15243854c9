//! The report's HTML escaper against maud's, the one its templates use for every other value.

use proptest::prelude::*;

/// maud's escaping of `text`, with `'` also escaped as the page has always written it.
fn maud(text: &str) -> String {
    let mut out = String::new();
    std::fmt::Write::write_str(&mut maud::Escaper::new(&mut out), text).unwrap();
    out.replace('\'', "&#39;")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn esc_escapes_as_maud_does(text in prop_oneof!["[&<>\"'aé ]{0,40}", any::<String>()]) {
        prop_assert_eq!(kvbench_report::print::html::esc(&text), maud(&text));
    }
}
