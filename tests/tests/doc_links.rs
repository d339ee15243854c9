//! Every relative link of `README.md` and `docs/*.md` leads somewhere: its file or folder exists,
//! and its `#anchor` is a heading of the page it names, slugged as GitHub slugs headings. And
//! the README links every page of `docs/`, so none is out of reach.
//!
//! GitHub's slugs (github-slugger): the heading's text as rendered (code spans and emphasis
//! lose their marks, a link keeps its text), lower-cased, every character that is not a letter,
//! a digit, `-`, `_` or a space dropped, each space a `-`; a slug seen before on the page gets
//! `-1`, `-2`, …

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// `text` without its fenced code blocks (each line kept empty, so line numbers hold).
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        let t = line.trim_start();
        match fence {
            Some(f) if t.starts_with(f) => fence = None,
            Some(_) => {}
            None if t.starts_with("```") || t.starts_with("~~~") => fence = Some(&t[..3]),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// `text` with its inline code spans blanked: a span never crosses an empty line.
fn without_code_spans(text: &str) -> String {
    let mut out = String::new();
    for paragraph in text.split("\n\n") {
        let mut in_code = false;
        for c in paragraph.chars() {
            if c == '`' {
                in_code = !in_code;
                out.push(' ');
            } else if in_code && c != '\n' {
                out.push(' ');
            } else {
                out.push(c);
            }
        }
        out.push_str("\n\n");
    }
    out
}

/// `[text](target)` → `text`, for a heading's rendered text.
fn link_texts(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|i| open + i) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|i| close + i) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// GitHub's slug of one heading's text.
fn slug(heading: &str) -> String {
    link_texts(heading)
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings (ATX headings outside code blocks), duplicates numbered.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose(text).lines() {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// Every link target of a page: `(line number, target)`, outside code.
fn links(text: &str) -> Vec<(usize, String)> {
    let text = without_code_spans(&prose(text));
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push((n + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// What is broken in `page`'s links, resolved from its folder; `read` reads a linked page.
fn broken(page: &Path, text: &str, read: &dyn Fn(&Path) -> Option<String>) -> Vec<String> {
    let dir = page.parent().unwrap_or(Path::new("."));
    let root = repo();
    let name = page
        .strip_prefix(&root)
        .unwrap_or(page)
        .display()
        .to_string();
    let mut problems = Vec::new();
    for (n, target) in links(text) {
        if target.is_empty() {
            problems.push(format!("{name}:{n}: an empty link"));
            continue;
        }
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((f, a)) => (f, Some(a)),
            None => (target.as_str(), None),
        };
        let linked = if file.is_empty() {
            page.to_path_buf()
        } else {
            dir.join(file)
        };
        let Some(anchor) = anchor else {
            if !linked.exists() {
                problems.push(format!("{name}:{n}: `{target}`: no such file"));
            }
            continue;
        };
        let body = if file.is_empty() {
            Some(text.to_string())
        } else {
            read(&linked)
        };
        match body {
            None => problems.push(format!("{name}:{n}: `{target}`: no such file")),
            Some(_) if linked.extension().is_none_or(|e| e != "md") => problems.push(format!(
                "{name}:{n}: `{target}`: an anchor into a file that is no Markdown page"
            )),
            Some(body) if !anchors(&body).contains(anchor) => problems.push(format!(
                "{name}:{n}: `{target}`: no heading with that anchor (it has: {})",
                anchors(&body).into_iter().collect::<Vec<_>>().join(", ")
            )),
            Some(_) => {}
        }
    }
    problems
}

fn pages() -> Vec<PathBuf> {
    let root = repo();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(!docs.is_empty(), "docs/ has no page");
    pages.extend(docs);
    pages
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a page");
        checked += links(&text).len();
        problems.extend(broken(&page, &text, &read));
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser blind?"
    );
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_readme_links_every_docs_page() {
    let root = repo();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let targets: BTreeSet<String> = links(&readme)
        .into_iter()
        .map(|(_, t)| t.split('#').next().unwrap_or("").to_string())
        .collect();
    let missing: Vec<String> = pages()
        .into_iter()
        .skip(1)
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .filter(|p| !targets.contains(p))
        .collect();
    assert!(missing.is_empty(), "README.md links none of: {missing:?}");
}

#[test]
fn slugs_are_githubs() {
    for (heading, want) in [
        (
            "The report at a URL: `GET /report`",
            "the-report-at-a-url-get-report",
        ),
        ("A run's cost", "a-runs-cost"),
        (
            "Faults: stores killed and stopped mid-run, nothing lost",
            "faults-stores-killed-and-stopped-mid-run-nothing-lost",
        ),
        ("kvbench — edge data stores", "kvbench--edge-data-stores"),
        (
            "Reproducing the published runs (k6)",
            "reproducing-the-published-runs-k6",
        ),
        ("snake_case and [a link](x.md)", "snake_case-and-a-link"),
    ] {
        assert_eq!(slug(heading), want, "{heading}");
    }
    let page = "# A\n\n## A\n\n```sh\n# not a heading\n```\n";
    assert_eq!(anchors(page), ["a", "a-1"].map(String::from).into());
}

#[test]
fn a_broken_link_or_anchor_is_named() {
    let root = repo();
    let page = root.join("docs/page.md");
    let text = "# Top\n\n[ok](#top), [gone](#nowhere), [file](../Cargo.toml), [no](missing.md),\n\
                `[code](ignored.md)`, [far](../README.md#the-two-commands), [bad](../README.md#nope)\n\
                ```\n[fenced](ignored-too.md)\n```\n";
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    let problems = broken(&page, text, &read);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].contains("`#nowhere`: no heading"),
        "{}",
        problems[0]
    );
    assert!(
        problems[1].contains("`missing.md`: no such file"),
        "{}",
        problems[1]
    );
    assert!(
        problems[2].contains("`../README.md#nope`"),
        "{}",
        problems[2]
    );
}
