//! The fleet: the worker deployed once per cloud region (`[placement] region`), each member a
//! vantage point the probes call over HTTP (only a fetch handler is placed). Default regions are
//! in `fleet-regions.json`; the `FLEET` var lists a deployment's members.

use crate::error::ParamError;
use crate::stores::durable::LocationHint;
use kvbench_wire::kept::{clean_detail, FailureKind, PlacementCheck};

/// Var: the members the probes call, `label=url` pairs separated by commas or whitespace
/// (`npm run deploy` sets it; `npm run dev` points it at its local members).
pub const FLEET_VAR: &str = "FLEET";
/// Most members a deployment may list (an account has at most 500 workers).
pub const MAX_MEMBERS: usize = 200;
/// Longest member label.
pub const MAX_LABEL_LEN: usize = 64;
/// The default regions, with the metro and colo each is expected in.
pub const REGIONS_JSON: &str = include_str!("../../fleet-regions.json");

/// A placement region of the default fleet.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Region {
    /// `aws:us-east-1`, `gcp:europe-west9`, `azure:southafricanorth`: the `[placement] region`.
    pub region: String,
    /// Where the cloud region is.
    pub metro: String,
    /// The Cloudflare data centers of its metro, the expected one first: an answer whose
    /// `cf-placement` names one of them ran where the label says ([`classify`]).
    pub colos: Vec<String>,
    /// Where the member's probe object is created (`Region::hint`): the location hint nearest
    /// the region, so the probe's call to the member is short.
    hint: String,
    pub continent: String,
}

impl Region {
    /// The colo the region is expected to map to.
    pub fn colo(&self) -> &str {
        self.colos.first().map_or("", String::as_str)
    }

    /// The location hint of the member's probe object.
    pub fn hint(&self) -> Option<LocationHint> {
        LocationHint::parse(&self.hint)
    }
}

#[derive(serde::Deserialize)]
struct RegionsFile {
    regions: Vec<Region>,
}

/// The default regions (`fleet-regions.json`), parsed once per isolate.
pub fn regions() -> &'static [Region] {
    static REGIONS: std::sync::OnceLock<Vec<Region>> = std::sync::OnceLock::new();
    REGIONS.get_or_init(|| {
        serde_json::from_str::<RegionsFile>(REGIONS_JSON)
            .map(|f| f.regions)
            .unwrap_or_default()
    })
}

/// The default region a label names, if it is one.
pub fn region(label: &str) -> Option<&'static Region> {
    regions().iter().find(|r| r.region == label)
}

/// One member: its label (the region it is placed in, or any name) and its base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub label: String,
    pub url: String,
}

impl Member {
    /// The member's `/test` with its own defaults, `do` measuring its colo's own objects
    /// (`do_scope=colo`), as a hint probe measures its hint's.
    pub fn test_url(&self) -> String {
        format!("{}/test?do_scope=colo", self.url.trim_end_matches('/'))
    }

    /// Where this member's probe object is created: its region's hint (`None` for a member
    /// whose label is no known region: created wherever the first call comes from).
    pub fn probe_hint(&self) -> Option<LocationHint> {
        region(&self.label).and_then(Region::hint)
    }

    /// The name of the probe object that calls this member.
    pub fn object_name(&self) -> String {
        format!("member:{}", self.label)
    }
}

/// A label: 1-64 of `A-Z a-z 0-9 : . _ -` (a region id is one).
pub fn parse_label(parameter: &str, text: &str) -> Result<String, ParamError> {
    crate::operations::name::parse_name(parameter, "member label", text, MAX_LABEL_LEN, b":._-")
}

/// A member's base URL: `http(s)://host[:port][/path]`, no credentials, query or fragment (the
/// probes send `BENCH_TOKEN` as a header; a secret never travels in a URL).
pub fn parse_member_url(parameter: &str, label: &str, text: &str) -> Result<String, ParamError> {
    let bad = |why: &str| ParamError::new(parameter, format!("member {label}: {why}"));
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .ok_or_else(|| bad("the URL must start with http:// or https://"))?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() {
        return Err(bad("the URL has no host"));
    }
    // Anywhere, not only before the first `/`: `http://tok:SECRET/x@host` is a credential
    // too, to some parsers; a member's URL never needs an `@`.
    if rest.contains('@') {
        return Err(bad(
            "the URL must not carry credentials (no '@' anywhere; the probes send BENCH_TOKEN as a header)",
        ));
    }
    if text.contains(['?', '#']) || text.bytes().any(|b| b <= b' ' || b >= 0x7f) {
        return Err(bad(
            "the URL must be a plain base URL (no query, fragment or spaces)",
        ));
    }
    Ok(text.trim_end_matches('/').to_string())
}

/// `FLEET`: `label=url` pairs, comma or whitespace separated; labels unique. Empty: no members.
pub fn parse_members(parameter: &str, text: &str) -> Result<Vec<Member>, ParamError> {
    let mut members: Vec<Member> = Vec::new();
    for pair in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
    {
        let (label, url) = pair.split_once('=').ok_or_else(|| {
            ParamError::new(
                parameter,
                format!("expected label=url, got {pair:?} (e.g. aws:us-east-1=https://kvbench-aws-us-east-1.you.workers.dev)"),
            )
        })?;
        let label = parse_label(parameter, label)?;
        let url = parse_member_url(parameter, &label, url)?;
        if members.iter().any(|m| m.label == label) {
            return Err(ParamError::new(
                parameter,
                format!("member {label} is listed twice"),
            ));
        }
        members.push(Member { label, url });
    }
    if members.len() > MAX_MEMBERS {
        return Err(ParamError::new(
            parameter,
            format!("at most {MAX_MEMBERS} members, got {}", members.len()),
        ));
    }
    Ok(members)
}

/// What a member's answer to `GET /test` was, read once every span of it is over.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberReply {
    /// The colo the member measured in (its answer's `colo`), or "unknown".
    pub colo: String,
    /// Its isolate's first request (`isolate_requests` 1): a cold answer.
    pub cold: bool,
    /// `None`: a `/test` answer, kept as sent; else `malformed` (a 200 with no answer or no
    /// handler time) or `status` (any other), with what it said (cleaned).
    pub failure: Option<(FailureKind, Option<u16>, String)>,
}

/// Reads a member's reply; an answer without its handler time (`Server-Timing`) is `malformed`,
/// since a round trip cannot stand beside the others' handler times.
pub fn member_reply(status: u16, body: &str, handler_ms: Option<f64>) -> MemberReply {
    let answer: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let field = |name: &str| answer.as_ref().and_then(|a| a.get(name));
    let colo = field("colo")
        .and_then(serde_json::Value::as_str)
        .filter(|c| c.len() <= 16 && c.bytes().all(|b| b.is_ascii_alphanumeric()))
        .unwrap_or("unknown")
        .to_string();
    let cold = field("isolate_requests").and_then(serde_json::Value::as_u64) == Some(1);
    let is_answer = field("stores").is_some_and(serde_json::Value::is_object);
    let detail = || clean_detail(body, 300);
    let failure = match (status, is_answer) {
        (200, true) if handler_ms.is_some() => None,
        (200, true) => Some((
            FailureKind::Malformed,
            None,
            format!(
                "its /test answer has no Server-Timing: {SERVER_TIMING_METRIC};dur= (the \
                 member's handler time): a member of another kvbench build; redeploy the fleet"
            ),
        )),
        (200, false) => Some((FailureKind::Malformed, None, detail())),
        (status, _) => Some((FailureKind::Status, Some(status), detail())),
    };
    MemberReply {
        colo,
        cold: cold && failure.is_none(),
        failure,
    }
}

/// The `cf-placement` header of a placed worker's answer (`remote-IAD`, `local-LHR`): kept as
/// sent when it has that shape, else dropped (a member's text never reaches a report unchecked).
pub fn placement(header: Option<&str>) -> Option<String> {
    let value = header?.trim();
    let (kind, colo) = value.split_once('-')?;
    let ok = matches!(kind, "remote" | "local")
        && (2..=8).contains(&colo.len())
        && colo.bytes().all(|b| b.is_ascii_alphanumeric());
    ok.then(|| value.to_string())
}

/// What a member's answer says of where it ran, from its two witnesses ([`classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub check: PlacementCheck,
    /// `cf-placement` names one colo and the trace another (both known).
    pub disagree: bool,
}

/// Whether a member's answer ran where its label says, from its `cf-placement` ([`placement`])
/// and its trace's colo (`None`: unknown) against the region's colos (`None`: an unknown region,
/// any `remote-` is placed). A known trace decides (its metro is placed, another
/// [`PlacementCheck::TraceElsewhere`]); else the header alone ([`by_placement`]). Two known
/// witnesses naming different colos are counted as a disagreement.
pub fn classify(
    placement: Option<&str>,
    trace: Option<&str>,
    expected: Option<&[String]>,
) -> Verdict {
    let header_colo = placement
        .and_then(|p| p.split_once('-'))
        .map(|(_, colo)| colo);
    let disagree = matches!((header_colo, trace), (Some(h), Some(t)) if !h.eq_ignore_ascii_case(t));
    let check = match (trace, expected) {
        (Some(t), Some(colos)) if in_metro(t, colos) => PlacementCheck::Placed,
        (Some(_), Some(_)) => PlacementCheck::TraceElsewhere,
        _ => by_placement(placement, expected),
    };
    Verdict { check, disagree }
}

fn in_metro(colo: &str, colos: &[String]) -> bool {
    colos.iter().any(|c| c.eq_ignore_ascii_case(colo))
}

/// The verdict of `cf-placement` alone: `remote-XXX` with XXX among `expected` (or any, with no
/// region) is placed, another `remote-` elsewhere, `local-…` or none unplaced.
fn by_placement(placement: Option<&str>, expected: Option<&[String]>) -> PlacementCheck {
    match (placement.and_then(|p| p.strip_prefix("remote-")), expected) {
        (None, _) => PlacementCheck::Unplaced,
        (Some(colo), Some(colos)) if !in_metro(colo, colos) => PlacementCheck::Elsewhere,
        (Some(_), _) => PlacementCheck::Placed,
    }
}

/// Why an answer that is not [`PlacementCheck::Placed`] is left out of `label`'s row, or that
/// its two witnesses disagree, for a probe's `last_error`; `None` when all is well.
pub fn placement_error(
    label: &str,
    placement: Option<&str>,
    trace: Option<&str>,
    verdict: Verdict,
) -> Option<String> {
    let expected = region(label).map(|r| format!("{} ({})", r.colos.join(" or "), r.metro));
    let expected = expected.as_deref().unwrap_or("a colo of its metro");
    let header = placement.unwrap_or("none");
    let trace = trace.unwrap_or(kvbench_wire::trace::UNKNOWN);
    let kept = "the answer is kept but not counted in its row";
    match verdict.check {
        PlacementCheck::Placed if verdict.disagree => Some(format!(
            "witnesses disagree: cf-placement {header} but Cloudflare's trace says {trace} (in {label}'s metro, so counted by the trace)"
        )),
        PlacementCheck::Placed => None,
        PlacementCheck::TraceElsewhere => Some(format!(
            "ran elsewhere: Cloudflare's trace says {trace} where {label} expects {expected} (cf-placement {header}); {kept}"
        )),
        PlacementCheck::Elsewhere => Some(format!(
            "placed elsewhere: cf-placement {header} where {label} expects {expected} (trace {trace}); {kept}"
        )),
        PlacementCheck::Unplaced | PlacementCheck::Other => Some(match placement {
            Some(p) => format!("unplaced: cf-placement {p} (the member ran where it was called, not in {label}; trace {trace}); {kept}"),
            None => format!("unplaced: the answer has no cf-placement header and its trace says {trace} (placement did not apply to this member, so it did not run in {label}); {kept}"),
        }),
    }
}

/// The handler time a member says in `Server-Timing` (`kvbench;dur=12.5`, among any other
/// metrics a proxy added), ms; `None` when it says none, or an impossible one.
pub fn server_timing_ms(header: Option<&str>) -> Option<f64> {
    header?.split(',').find_map(|metric| {
        let mut parts = metric.split(';').map(str::trim);
        if parts.next()? != SERVER_TIMING_METRIC {
            return None;
        }
        parts.find_map(|p| {
            let v = p
                .strip_prefix("dur=")?
                .trim_matches('"')
                .parse::<f64>()
                .ok()?;
            (v.is_finite() && (0.0..=MAX_HANDLER_MS).contains(&v)).then_some(v)
        })
    })
}

/// What a member answered one call, as the probes read it (`src/operations/probes.rs` fetches it).
#[derive(Debug, Clone, PartialEq)]
pub struct Called {
    pub status: u16,
    /// Its `cf-placement`, shape-checked ([`placement`]).
    pub placement: Option<String>,
    /// Its handler time ([`server_timing_ms`]).
    pub handler_ms: Option<f64>,
    /// The colo its isolate's trace named (its [`kvbench_wire::trace::HEADER`], shape-checked
    /// by [`kvbench_wire::trace::read_header`]); `None`: unknown or not said.
    pub trace_colo: Option<String>,
    pub body: String,
}

/// One member as a deploy check sees it (`POST /probes/check`): what it answered and, when it
/// cannot serve as its label's vantage point, why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MemberCheck {
    pub label: String,
    /// The answer's status (`None`: no answer).
    pub status: Option<u16>,
    pub placement: Option<String>,
    /// The colo its trace named, or "unknown".
    pub trace_colo: String,
    /// `cf-placement` and the trace name different colos.
    pub trace_disagrees: bool,
    /// `None` when there was no `/test` answer to check.
    pub placement_check: Option<PlacementCheck>,
    /// The colo the member measured in, or "unknown".
    pub colo: String,
    pub handler_ms: Option<f64>,
    /// The whole call, from the calling worker.
    pub call_ms: f64,
    /// Why this member cannot serve as its label's vantage point: unreachable, refused, not a
    /// `/test` answer, or run outside its region. `None`: all is well.
    pub problem: Option<String>,
}

/// Reads one call to `label`: `called` is what it answered, or why nothing (the failure kind
/// and what happened); `call_ms` how long the call took.
pub fn check(
    label: &str,
    called: Result<&Called, (FailureKind, &str)>,
    call_ms: f64,
) -> MemberCheck {
    let mut out = MemberCheck {
        label: label.to_string(),
        status: None,
        placement: None,
        trace_colo: kvbench_wire::trace::UNKNOWN.into(),
        trace_disagrees: false,
        placement_check: None,
        colo: "unknown".into(),
        handler_ms: None,
        call_ms,
        problem: None,
    };
    let c = match called {
        Ok(c) => c,
        Err((kind, detail)) => {
            out.problem = Some(format!(
                "unreachable ({}): {}",
                kind.as_str(),
                clean_detail(detail, 300)
            ));
            return out;
        }
    };
    out.status = Some(c.status);
    out.placement.clone_from(&c.placement);
    out.handler_ms = c.handler_ms;
    let trace = c.trace_colo.as_deref();
    out.trace_colo = kvbench_wire::trace::header_value(trace).to_string();
    let reply = member_reply(c.status, &c.body, c.handler_ms);
    out.colo = reply.colo;
    out.problem = match reply.failure {
        Some((_, Some(status), detail)) if detail.contains("1042") => Some(format!(
            "answered {status} with Cloudflare's error 1042 (a Worker fetching another Worker of the same zone): the calling worker needs the global_fetch_strictly_public compatibility flag (wrangler.toml's compatibility_flags) — {detail}"
        )),
        Some((_, Some(status), detail)) => Some(format!("answered {status}: {detail}")),
        Some((kind, None, detail)) => Some(format!("{}: {detail}", kind.as_str())),
        None => {
            let expected = region(label).map(|r| r.colos.as_slice());
            let verdict = classify(c.placement.as_deref(), trace, expected);
            out.placement_check = Some(verdict.check);
            out.trace_disagrees = verdict.disagree;
            // A disagreement of the witnesses is said (`trace_disagrees`), but a member whose
            // trace places it in its metro serves as its vantage point.
            placement_error(label, c.placement.as_deref(), trace, verdict)
                .filter(|_| verdict.check != PlacementCheck::Placed)
        }
    };
    out
}

/// The `Server-Timing` metric a `/test` answer carries its handler time in.
pub const SERVER_TIMING_METRIC: &str = "kvbench";
/// The longest handler time a member may report (a day): anything beyond is no measurement.
const MAX_HANDLER_MS: f64 = 86_400_000.0;

/// The `Server-Timing` header value of a `/test` answer whose handler took `ms`.
pub fn server_timing(ms: f64) -> String {
    format!("{SERVER_TIMING_METRIC};dur={ms}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_regions_are_at_least_twenty_distinct_metros_on_every_inhabited_continent() {
        let regions = regions();
        assert!(regions.len() >= 20, "{} regions", regions.len());
        let mut metros: Vec<_> = regions.iter().map(|r| r.metro.as_str()).collect();
        metros.sort();
        metros.dedup();
        assert_eq!(metros.len(), regions.len(), "one region per metro");
        let mut colos: Vec<_> = regions.iter().flat_map(|r| r.colos.iter()).collect();
        let listed = colos.len();
        colos.sort();
        colos.dedup();
        assert_eq!(colos.len(), listed, "no colo in two metros");
        assert!(
            regions.iter().all(|r| r.hint().is_some()),
            "every region has a valid hint"
        );
        for continent in [
            "North America",
            "South America",
            "Europe",
            "Africa",
            "Asia",
            "Oceania",
        ] {
            assert!(
                regions.iter().any(|r| r.continent == continent),
                "{continent}"
            );
        }
        for r in regions {
            assert!(
                ["aws:", "gcp:", "azure:"]
                    .iter()
                    .any(|p| r.region.starts_with(p)),
                "{}",
                r.region
            );
            assert_eq!(parse_label("FLEET", &r.region).unwrap(), r.region);
        }
        assert_eq!(region("aws:us-east-1").unwrap().colo(), "IAD");
        assert_eq!(
            region("aws:eu-central-1").unwrap().hint(),
            Some(LocationHint::Weur)
        );
    }

    #[test]
    fn members_from_the_var() {
        let m = parse_members(
            "FLEET",
            "aws:us-east-1=https://a.example.workers.dev/, local-b=http://127.0.0.1:9001\nlocal-c=http://127.0.0.1:9002/base",
        )
        .unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].label, "aws:us-east-1");
        assert_eq!(
            m[0].test_url(),
            "https://a.example.workers.dev/test?do_scope=colo"
        );
        assert_eq!(
            m[2].test_url(),
            "http://127.0.0.1:9002/base/test?do_scope=colo"
        );
        assert_eq!(m[1].object_name(), "member:local-b");
        assert!(parse_members("FLEET", "  ").unwrap().is_empty());
        for bad in [
            "nolabel",
            "a=ftp://x",
            "a=https://",
            "a=https://user:secret@x.dev",
            "a=http://tok:secret/x@host",
            "a=https://x.dev/p@secret",
            "a=https://x.dev/?token=1",
            "a b=https://x.dev",
            "a/b=https://x.dev",
            "a=https://x.dev,a=https://y.dev",
        ] {
            let e = parse_members("FLEET", bad).unwrap_err();
            assert_eq!(e.parameter, "FLEET", "{bad}");
            assert!(!e.message.contains("secret"), "{}", e.message);
        }
    }

    #[test]
    fn member_replies() {
        let answer = r#"{"colo":"IAD","isolate_requests":1,"stores":{"kv":{}}}"#;
        let ok = member_reply(200, answer, Some(3.0));
        assert_eq!((ok.colo.as_str(), ok.cold, ok.failure), ("IAD", true, None));
        // The same answer without its handler time: another build's, not kept as an answer.
        let untimed = member_reply(200, answer, None);
        assert!(!untimed.cold);
        let (kind, _, detail) = untimed.failure.unwrap();
        assert_eq!(kind, FailureKind::Malformed);
        assert!(
            detail.contains("no Server-Timing: kvbench;dur="),
            "{detail}"
        );
        let warm = member_reply(
            200,
            r#"{"colo":"IAD","isolate_requests":2,"stores":{}}"#,
            Some(1.0),
        );
        assert!(!warm.cold);
        let busy = member_reply(503, "overloaded \u{1b}[31m", None);
        assert_eq!(busy.colo, "unknown");
        assert!(!busy.cold);
        let (kind, status, detail) = busy.failure.unwrap();
        assert_eq!((kind, status), (FailureKind::Status, Some(503)));
        assert!(!detail.contains('\u{1b}'));
        let odd = member_reply(200, r#"{"colo":"<b>","isolate_requests":1}"#, Some(1.0));
        assert_eq!(odd.colo, "unknown");
        assert!(!odd.cold, "a failure is never a cold answer");
        assert_eq!(odd.failure.unwrap().0, FailureKind::Malformed);
    }

    /// Every combination of the two witnesses, against a region (IAD) and against none.
    #[test]
    fn the_two_witnesses_of_place() {
        use PlacementCheck::{Elsewhere, Placed, TraceElsewhere, Unplaced};
        let iad = ["IAD".to_string()];
        let region = Some(&iad[..]);
        // (cf-placement, trace, region) => (check, disagree)
        let cases = [
            // Both agree, in the region.
            (Some("remote-IAD"), Some("IAD"), region, Placed, false),
            (Some("remote-iad"), Some("IAD"), region, Placed, false),
            // Trace unknown: the header alone decides, as before the trace.
            (Some("remote-IAD"), None, region, Placed, false),
            (Some("remote-FRA"), None, region, Elsewhere, false),
            (Some("local-IAD"), None, region, Unplaced, false),
            (None, None, region, Unplaced, false),
            // Header missing (it may go away), trace in the region: placed by the trace.
            (None, Some("IAD"), region, Placed, false),
            // Trace outside the region: apart, whatever the header says.
            (None, Some("NRT"), region, TraceElsewhere, false),
            (
                Some("remote-NRT"),
                Some("NRT"),
                region,
                TraceElsewhere,
                false,
            ),
            (
                Some("remote-IAD"),
                Some("NRT"),
                region,
                TraceElsewhere,
                true,
            ),
            // The two disagree: the trace decides, the disagreement is counted.
            (Some("remote-FRA"), Some("IAD"), region, Placed, true),
            (Some("local-EWR"), Some("IAD"), region, Placed, true),
            (Some("local-IAD"), Some("IAD"), region, Placed, false),
            // No region to hold a colo against: the header decides; a disagreement still counts.
            (Some("remote-FRA"), None, None, Placed, false),
            (Some("remote-FRA"), Some("FRA"), None, Placed, false),
            (Some("remote-FRA"), Some("LHR"), None, Placed, true),
            (Some("local-FRA"), Some("LHR"), None, Unplaced, true),
            (None, Some("LHR"), None, Unplaced, false),
        ];
        for (header, trace, expected, check, disagree) in cases {
            assert_eq!(
                classify(header, trace, expected),
                Verdict { check, disagree },
                "{header:?} {trace:?} {expected:?}"
            );
        }
    }

    #[test]
    fn each_verdict_says_why() {
        let label = "aws:us-east-1";
        let v = |check, disagree| Verdict { check, disagree };
        let error = |p, t, verdict| placement_error(label, p, t, verdict);
        let placed = v(PlacementCheck::Placed, false);
        assert_eq!(error(Some("remote-IAD"), Some("IAD"), placed), None);
        let e = error(
            Some("remote-FRA"),
            None,
            v(PlacementCheck::Elsewhere, false),
        )
        .unwrap();
        assert!(
            e.contains("remote-FRA")
                && e.contains("IAD (Ashburn, Virginia)")
                && e.contains("trace unknown"),
            "{e}"
        );
        let e = error(None, Some("NRT"), v(PlacementCheck::TraceElsewhere, false)).unwrap();
        assert!(
            e.starts_with(
                "ran elsewhere: Cloudflare's trace says NRT where aws:us-east-1 expects IAD"
            ) && e.contains("cf-placement none"),
            "{e}"
        );
        let e = error(
            Some("remote-FRA"),
            Some("IAD"),
            v(PlacementCheck::Placed, true),
        )
        .unwrap();
        assert!(
            e.starts_with(
                "witnesses disagree: cf-placement remote-FRA but Cloudflare's trace says IAD"
            ),
            "{e}"
        );
        let e = error(None, None, v(PlacementCheck::Unplaced, false)).unwrap();
        assert!(
            e.contains("no cf-placement") && e.contains("trace says unknown"),
            "{e}"
        );
        let e = error(Some("local-EWR"), None, v(PlacementCheck::Unplaced, false)).unwrap();
        assert!(e.starts_with("unplaced: cf-placement local-EWR"), "{e}");
    }

    #[test]
    fn a_deploy_check_names_what_is_wrong_with_each_member() {
        let answer = r#"{"colo":"IAD","isolate_requests":1,"stores":{"kv":{}}}"#;
        let called =
            |status: u16, placement: Option<&str>, handler_ms: Option<f64>, body: &str| Called {
                status,
                placement: placement.map(str::to_string),
                handler_ms,
                trace_colo: None,
                body: body.to_string(),
            };
        let ok = check(
            "aws:us-east-1",
            Ok(&called(200, Some("remote-IAD"), Some(3.5), answer)),
            40.0,
        );
        assert_eq!(ok.problem, None);
        assert_eq!(ok.placement_check, Some(PlacementCheck::Placed));
        assert_eq!(
            (ok.colo.as_str(), ok.handler_ms, ok.call_ms),
            ("IAD", Some(3.5), 40.0)
        );
        let cases = [
            (called(404, None, None, "error code: 1042"), "error 1042"),
            (called(403, None, None, "nope"), "answered 403: nope"),
            (
                called(200, Some("remote-IAD"), Some(1.0), "<html>"),
                "malformed: <html>",
            ),
            (
                called(200, Some("remote-IAD"), None, answer),
                "no Server-Timing",
            ),
            (
                called(200, Some("local-EWR"), Some(1.0), answer),
                "unplaced: cf-placement local-EWR",
            ),
            (
                called(200, None, Some(1.0), answer),
                "unplaced: the answer has no cf-placement",
            ),
            (
                called(200, Some("remote-FRA"), Some(1.0), answer),
                "placed elsewhere: cf-placement remote-FRA",
            ),
        ];
        for (c, expected) in cases {
            let got = check("aws:us-east-1", Ok(&c), 1.0);
            let problem = got.problem.unwrap_or_default();
            assert!(problem.contains(expected), "{c:?}: {problem}");
        }
        assert_eq!(ok.trace_colo, "unknown", "a member that said no trace colo");
        let gone = check("x", Err((FailureKind::Connect, "refused\u{1b}[0m")), 2.0);
        assert_eq!(
            gone.problem.as_deref(),
            Some("unreachable (connect): refused [0m")
        );
        assert_eq!(gone.status, None);
    }

    #[test]
    fn a_deploy_check_goes_by_the_trace_where_it_is_known() {
        let answer = r#"{"colo":"IAD","isolate_requests":1,"stores":{"kv":{}}}"#;
        let traced = |placement: Option<&str>, trace: &str| Called {
            status: 200,
            placement: placement.map(str::to_string),
            handler_ms: Some(1.0),
            trace_colo: Some(trace.to_string()),
            body: answer.to_string(),
        };
        let agree = check("aws:us-east-1", Ok(&traced(None, "IAD")), 1.0);
        assert_eq!(
            (
                agree.problem,
                agree.placement_check,
                agree.trace_colo.as_str(),
                agree.trace_disagrees
            ),
            (None, Some(PlacementCheck::Placed), "IAD", false)
        );
        let disagree = check("aws:us-east-1", Ok(&traced(Some("remote-FRA"), "IAD")), 1.0);
        assert_eq!((disagree.problem, disagree.trace_disagrees), (None, true));
        let away = check("aws:us-east-1", Ok(&traced(Some("remote-IAD"), "NRT")), 1.0);
        assert_eq!(away.placement_check, Some(PlacementCheck::TraceElsewhere));
        assert!(away
            .problem
            .unwrap()
            .starts_with("ran elsewhere: Cloudflare's trace says NRT"));
    }

    #[test]
    fn the_handler_time_from_server_timing() {
        assert_eq!(server_timing_ms(Some(&server_timing(12.5))), Some(12.5));
        assert_eq!(
            server_timing_ms(Some("cfL4;desc=\"?proto=TCP\", kvbench;desc=x;dur=3.25")),
            Some(3.25)
        );
        assert_eq!(server_timing_ms(Some("kvbench;dur=\"7\"")), Some(7.0));
        for bad in [
            None,
            Some(""),
            Some("cfL4;dur=5"),
            Some("kvbench"),
            Some("kvbench;dur=-1"),
            Some("kvbench;dur=NaN"),
            Some("kvbench;dur=1e300"),
            Some("kvbenchx;dur=1"),
        ] {
            assert_eq!(server_timing_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn placement_headers() {
        assert_eq!(placement(Some("remote-IAD")).as_deref(), Some("remote-IAD"));
        assert_eq!(placement(Some(" local-LHR ")).as_deref(), Some("local-LHR"));
        for bad in [
            None,
            Some(""),
            Some("remote-"),
            Some("x-IAD"),
            Some("remote-<b>"),
        ] {
            assert_eq!(placement(bad), None, "{bad:?}");
        }
    }
}
