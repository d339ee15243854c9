//! Every way the request path could still panic, listed: `panic!`-like macros, `unwrap()`,
//! `expect(..)` and `[..]` indexing in the non-test code of the worker (`src/`), the core
//! (`crates/core/src`) and the store descriptions it shares with the report (`crates/spec/src`),
//! the report (`crates/report/src`, which reads report.json files users
//! share, and runs as wasm in the report worker) and the report worker
//! (`crates/report-worker/src`), found by walking each crate's module tree from its `lib.rs`
//! with `syn`.
//! A panic on wasm32 aborts the instance and every request in flight in it (catching one needs
//! nightly), so the crates deny these with clippy lints; this test keeps the few that remain an
//! explicit, reasoned list, and fails when one appears that is not on it (or when an entry
//! matches nothing any more). Entries name the file and the line's text, not its number, so edits
//! elsewhere do not move them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// The panics that remain, each with why it cannot happen: (file, the line's text trimmed, why).
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "crates/spec/src/store.rs",
        "&STORES[self as usize]",
        "STORES holds one entry per StoreId, in order (tested)",
    ),
    (
        "crates/core/src/stores/upstash.rs",
        "t[c] = b.is_ascii_alphanumeric() || b == b'+' || b == b'/';",
        "c < 256 = the table's length, evaluated at compile time",
    ),
    (
        "crates/core/src/stores/upstash.rs",
        "BASE64[usize::from(b)]",
        "a u8 indexes a 256-entry table",
    ),
    (
        "crates/core/src/stores/value.rs",
        "*b = ALPHABET[usize::from(r & 63)];",
        "r & 63 < 64 = ALPHABET.len()",
    ),
    (
        "crates/report/src/collect.rs",
        "&mut v[id]",
        "slot() resizes v to more than id entries just before",
    ),
    (
        "crates/report/src/hist.rs",
        "Histogram::new(SIGFIG).expect(\"3 significant figures is valid\")",
        "hdrhistogram refuses only more than 5 significant figures; SIGFIG is the constant 3 \
         (every test that builds a histogram runs this)",
    ),
    (
        "crates/report/src/hist.rs",
        ".expect(\"bytes this type serialized, or checked and decoded once, itself\");",
        "a Frozen histogram's bytes were written by V2Serializer from a histogram, or decoded \
         successfully by the same deserializer when read (Hist::decode)",
    ),
    (
        "crates/report/src/print/chart.rs",
        "SPARE[i % SPARE.len()]",
        "i % SPARE.len() < SPARE.len(), a non-empty constant",
    ),
];

/// Macros that panic when reached.
const PANIC_MACROS: &[&str] = &["panic", "unreachable", "todo", "unimplemented"];
/// Methods that panic on `None`/`Err`.
const PANIC_METHODS: &[&str] = &["unwrap", "expect", "unwrap_err", "expect_err"];

/// One place that may panic: the file (from the repository root), the line's text, what it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Found {
    file: String,
    line: String,
    what: String,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Whether a `cfg(..)` predicate can only hold in a test build (`test`, `all(test, ..)`,
/// `any(..)` of such); `not(..)` never is.
fn test_only_cfg(meta: &syn::Meta) -> bool {
    match meta {
        syn::Meta::Path(p) => p.is_ident("test"),
        syn::Meta::List(list) => {
            let Ok(args) =
                list.parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
            else {
                return false;
            };
            if list.path.is_ident("all") {
                args.iter().any(test_only_cfg)
            } else if list.path.is_ident("any") {
                !args.is_empty() && args.iter().all(test_only_cfg)
            } else {
                false
            }
        }
        syn::Meta::NameValue(_) => false,
    }
}

/// `#[cfg(test)]`-like, `#[test]` or `#[wasm_bindgen_test]`: code that only a test build has.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let path = a.path();
        if path.is_ident("test")
            || path
                .segments
                .last()
                .is_some_and(|s| s.ident == "wasm_bindgen_test")
        {
            return true;
        }
        path.is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| test_only_cfg(&m))
    })
}

/// Walks one file's items, noting what may panic and the `mod name;` files to read next.
struct Walker<'a> {
    file: String,
    lines: Vec<&'a str>,
    found: Vec<Found>,
    /// `mod name;` declarations outside test code, with the inline modules around them.
    children: Vec<Vec<String>>,
    inline: Vec<String>,
}

impl Walker<'_> {
    fn note(&mut self, span: proc_macro2::Span, what: String) {
        let line = self
            .lines
            .get(span.start().line.saturating_sub(1))
            .map_or("", |l| l.trim());
        self.found.push(Found {
            file: self.file.clone(),
            line: line.to_string(),
            what,
        });
    }
}

impl<'ast> Visit<'ast> for Walker<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if is_test_only(attrs) {
            return;
        }
        if let syn::Item::Mod(m) = item {
            let name = m.ident.to_string();
            match &m.content {
                None => {
                    let mut path = self.inline.clone();
                    path.push(name);
                    self.children.push(path);
                }
                Some(_) => {
                    self.inline.push(name);
                    syn::visit::visit_item(self, item);
                    self.inline.pop();
                }
            }
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        if let syn::ImplItem::Fn(f) = item {
            if is_test_only(&f.attrs) {
                return;
            }
        }
        syn::visit::visit_impl_item(self, item);
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let name = call.method.to_string();
        if PANIC_METHODS.contains(&name.as_str()) {
            self.note(call.method.span(), format!(".{name}()"));
        }
        syn::visit::visit_expr_method_call(self, call);
    }

    fn visit_expr_index(&mut self, index: &'ast syn::ExprIndex) {
        self.note(index.bracket_token.span.open(), "[..] indexing".into());
        syn::visit::visit_expr_index(self, index);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        if PANIC_MACROS.contains(&name.as_str()) {
            self.note(mac.path.span(), format!("{name}!"));
        }
        // Most macros (format!, write!, vec!, ...) take expressions: look inside them too.
        if let Ok(args) =
            mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        {
            for arg in &args {
                self.visit_expr(arg);
            }
        }
    }
}

/// The file of module `path` (names from the crate root) under `src`: `a/b.rs` or `a/b/mod.rs`.
fn module_file(src: &Path, path: &[String]) -> PathBuf {
    let joined: PathBuf = path.iter().collect();
    let flat = src.join(&joined).with_extension("rs");
    if flat.exists() {
        flat
    } else {
        src.join(joined).join("mod.rs")
    }
}

/// Every place that may panic in the non-test code of the crate whose root is `src/lib.rs`, a
/// walk that must reach at least `files` files (so a broken walk cannot pass as a clean one).
fn scan(src: &str, least: usize) -> Vec<Found> {
    let root = root();
    let src_dir = root.join(src);
    let mut found = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut files = 0;
    while let Some(module) = todo.pop() {
        let path = if module.is_empty() {
            src_dir.join("lib.rs")
        } else {
            module_file(&src_dir, &module)
        };
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let rel = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        let mut walker = Walker {
            file: rel,
            lines: text.lines().collect(),
            found: Vec::new(),
            children: Vec::new(),
            inline: Vec::new(),
        };
        walker.visit_file(&ast);
        found.append(&mut walker.found);
        for child in walker.children {
            let mut path = module.clone();
            path.extend(child);
            todo.push(path);
        }
        files += 1;
    }
    assert!(
        files >= least,
        "{src}: only {files} files found from lib.rs"
    );
    found
}

fn report(found: &[Found]) -> String {
    found
        .iter()
        .map(|f| format!("  {}: {} in `{}`", f.file, f.what, f.line))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_panic_on_the_request_path_but_the_listed_ones() {
    let mut found = scan("src", 6);
    found.extend(scan("crates/core/src", 6));
    found.extend(scan("crates/spec/src", 4));
    found.extend(scan("crates/report/src", 6));
    found.extend(scan("crates/report-worker/src", 1));
    let allowed: BTreeMap<(&str, &str), &str> =
        ALLOWED.iter().map(|(f, l, why)| ((*f, *l), *why)).collect();
    for ((file, line), why) in &allowed {
        assert!(
            !why.trim().is_empty(),
            "{file}: `{line}` is allowed with no reason"
        );
    }
    let new: Vec<Found> = found
        .iter()
        .filter(|f| !allowed.contains_key(&(f.file.as_str(), f.line.as_str())))
        .cloned()
        .collect();
    assert!(
        new.is_empty(),
        "{} place(s) may panic on the request path (a panic aborts the wasm instance and every \
         request in flight in it): return an error instead, or add the line to ALLOWED in \
         {} with why it cannot panic:\n{}",
        new.len(),
        file!(),
        report(&new)
    );
    let stale: Vec<_> = allowed
        .keys()
        .filter(|(file, line)| !found.iter().any(|f| f.file == *file && f.line == *line))
        .collect();
    assert!(
        stale.is_empty(),
        "ALLOWED entries that match nothing any more: {stale:?}"
    );
}

/// The walker itself: it finds each kind, and skips test code (so the test above can fail).
#[test]
fn the_walker_finds_each_kind_and_skips_test_code() {
    let text = r#"
fn live(v: Vec<u8>, o: Option<u8>) -> u8 {
    let a = o.unwrap();
    let b = o.expect("b");
    let s = format!("{}", v[0]);
    if a > b { unreachable!("never") }
    panic!("{s}")
}
#[cfg(test)]
mod tests { fn t() { None::<u8>.unwrap(); } }
#[cfg(all(test, target_arch = "wasm32"))]
mod wasm_tests;
#[cfg(not(test))]
mod live_mod;
#[test]
fn t() { let _ = [1][0]; }
impl X { #[test] fn t() { None::<u8>.unwrap(); } fn u(&self) { self.0.unwrap() } }
"#;
    let ast = syn::parse_file(text).unwrap();
    let mut w = Walker {
        file: "x.rs".into(),
        lines: text.lines().collect(),
        found: Vec::new(),
        children: Vec::new(),
        inline: Vec::new(),
    };
    w.visit_file(&ast);
    let what: Vec<(&str, &str)> = w
        .found
        .iter()
        .map(|f| (f.what.as_str(), f.line.as_str()))
        .collect();
    assert_eq!(
        what,
        [
            (".unwrap()", "let a = o.unwrap();"),
            (".expect()", "let b = o.expect(\"b\");"),
            ("[..] indexing", "let s = format!(\"{}\", v[0]);"),
            ("unreachable!", "if a > b { unreachable!(\"never\") }"),
            ("panic!", "panic!(\"{s}\")"),
            (
                ".unwrap()",
                "impl X { #[test] fn t() { None::<u8>.unwrap(); } fn u(&self) { self.0.unwrap() } }"
            ),
        ]
    );
    assert_eq!(w.children, [vec!["live_mod".to_string()]]);
}
