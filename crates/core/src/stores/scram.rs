//! SCRAM-SHA-256 (RFC 5802, RFC 7677), PostgreSQL's password authentication, client side. As
//! rust-postgres's `authentication::sasl`, except that `Hi()` (thousands of HMACs in wasm) is
//! derived once per isolate per (password, salt, iterations) and cached under a digest; the
//! nonce, proof and server signature check stay per connection. SASLprep takes NFKC from the
//! platform ([`Nfkc`]) so the normalization tables stay out of the wasm.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// The SASL mechanism this speaks.
pub const MECHANISM: &str = "SCRAM-SHA-256";
/// The most PBKDF2 iterations a server may ask for: an unbounded count lets a hostile server
/// make the client compute without end (postgres-protocol's and pgjdbc's cap, CVE-2026-42198).
pub const MAX_ITERATIONS: u32 = 100_000;
/// How many (password, salt, iterations) the cache keeps (one per database user is usual).
const CACHE_ENTRIES: usize = 8;
/// `n,,`: no channel binding (the connection is not TLS-bound), no authorization identity.
const GS2_HEADER: &str = "n,,";

type HmacSha256 = Hmac<Sha256>;

/// Unicode Normalization Form KC, SASLprep's step 2.2, as the platform provides it: in the
/// worker, the runtime's `String.prototype.normalize("NFKC")` (its ICU tables, none in the
/// wasm); natively, [`nfkc_tables`].
pub type Nfkc = fn(&str) -> String;

/// NFKC from the `unicode-normalization` tables, for native code (tests, tools). The worker
/// never calls it, so the tables are not linked into its wasm.
pub fn nfkc_tables(s: &str) -> String {
    unicode_normalization::UnicodeNormalization::nfkc(s).collect()
}

/// SASLprep (RFC 4013) of `s` with `nfkc`: the prepared string, or `None` when SASLprep refuses
/// it (a prohibited character, bad bidirectional text, an unassigned code point). The same
/// steps as `stringprep::saslprep` 0.1.5, which a test compares this with.
pub fn saslprep(s: &str, nfkc: Nfkc) -> Option<std::borrow::Cow<'_, str>> {
    use stringprep::tables as t;
    if s.chars()
        .all(|c| c.is_ascii() && !t::ascii_control_character(c))
    {
        return Some(std::borrow::Cow::Borrowed(s));
    }
    // 2.1 Mapping: non-ASCII spaces to a space, the "commonly mapped to nothing" to nothing.
    let mapped: String = s
        .chars()
        .map(|c| {
            if t::non_ascii_space_character(c) {
                ' '
            } else {
                c
            }
        })
        .filter(|&c| !t::commonly_mapped_to_nothing(c))
        .collect();
    // 2.2 Normalization.
    let normalized = nfkc(&mapped);
    // 2.3 Prohibited output (C.1.2 to C.9) and 2.5 unassigned code points (A.1).
    let prohibited = |c: char| {
        t::non_ascii_space_character(c)
            || t::ascii_control_character(c)
            || t::non_ascii_control_character(c)
            || t::private_use(c)
            || t::non_character_code_point(c)
            || t::surrogate_code(c)
            || t::inappropriate_for_plain_text(c)
            || t::inappropriate_for_canonical_representation(c)
            || t::change_display_properties_or_deprecated(c)
            || t::tagging_character(c)
            || t::unassigned_code_point(c)
    };
    if normalized.chars().any(prohibited) {
        return None;
    }
    // 2.4 Bidirectional characters (RFC 3454 section 6): with any RandALCat character, no LCat
    // character, and a RandALCat character first and last.
    if normalized.contains(t::bidi_r_or_al)
        && (normalized.contains(t::bidi_l)
            || !normalized.chars().next().is_some_and(t::bidi_r_or_al)
            || !normalized.chars().next_back().is_some_and(t::bidi_r_or_al))
    {
        return None;
    }
    Some(std::borrow::Cow::Owned(normalized))
}

/// The two keys of one (password, salt, iterations) the exchange needs.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Keys {
    client: [u8; 32],
    server: [u8; 32],
}

/// Derived keys by a digest of (normalized password, salt, iterations); at most
/// [`CACHE_ENTRIES`], the oldest replaced first.
#[derive(Default)]
pub struct KeyCache {
    entries: std::sync::Mutex<Vec<([u8; 32], Keys)>>,
    derivations: std::sync::atomic::AtomicU64,
}

impl KeyCache {
    pub const fn new() -> KeyCache {
        KeyCache {
            entries: std::sync::Mutex::new(Vec::new()),
            derivations: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How many times `Hi()` ran (what the cache saves is counted by tests, not timed).
    pub fn derivations(&self) -> u64 {
        self.derivations.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn keys(&self, password: &[u8], salt: &[u8], iterations: u32) -> Keys {
        let id: [u8; 32] = Sha256::new()
            .chain_update((password.len() as u64).to_be_bytes())
            .chain_update(password)
            .chain_update((salt.len() as u64).to_be_bytes())
            .chain_update(salt)
            .chain_update(iterations.to_be_bytes())
            .finalize()
            .into();
        // A poisoned lock (a panic elsewhere while it was held) only loses the cache.
        if let Ok(entries) = self.entries.lock() {
            if let Some((_, keys)) = entries.iter().find(|(k, _)| *k == id) {
                return *keys;
            }
        }
        self.derivations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let salted = hi(password, salt, iterations);
        let keys = Keys {
            client: hmac(&salted, b"Client Key"),
            server: hmac(&salted, b"Server Key"),
        };
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= CACHE_ENTRIES {
                entries.remove(0);
            }
            entries.push((id, keys));
        }
        keys
    }
}

/// The isolate's cache (the worker's one thread; natively, the process's).
pub static KEYS: KeyCache = KeyCache::new();

/// One SCRAM exchange: [`Scram::client_first`], [`Scram::client_final`], then [`Scram::verify`];
/// authenticated only when `verify` returns `Ok`.
pub struct Scram {
    nonce: String,
    /// After `client_final`: the auth message and the server key to check its signature.
    expect: Option<(String, [u8; 32])>,
}

impl Scram {
    /// With a fresh random nonce.
    pub fn new() -> Result<Scram, String> {
        let mut bytes = [0u8; 18];
        getrandom::fill(&mut bytes).map_err(|e| format!("no random nonce: {e}"))?;
        // 24 base64 characters: printable and without ',' as the RFC asks.
        Ok(Scram::with_nonce(STANDARD.encode(bytes)))
    }

    fn with_nonce(nonce: String) -> Scram {
        Scram {
            nonce,
            expect: None,
        }
    }

    /// `n,,n=,r=<nonce>` (PostgreSQL takes the user from the startup message).
    pub fn client_first(&self) -> String {
        format!("{GS2_HEADER}n=,r={}", self.nonce)
    }

    /// The client's final message for the server's first (`r=…,s=…,i=…`), with the proof.
    pub fn client_final(
        &mut self,
        password: &[u8],
        server_first: &[u8],
        cache: &KeyCache,
        nfkc: Nfkc,
    ) -> Result<String, String> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| "the server's first message is not UTF-8".to_string())?;
        let (nonce, salt, iterations) = parse_server_first(server_first)?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the server's nonce does not extend ours".into());
        }
        if iterations > MAX_ITERATIONS {
            return Err(format!(
                "the server asks for {iterations} iterations, over the {MAX_ITERATIONS} this client accepts"
            ));
        }
        let salt = STANDARD
            .decode(salt)
            .map_err(|e| format!("the server's salt is not base64: {e}"))?;
        let keys = cache.keys(&normalize(password, nfkc), &salt, iterations);
        let without_proof = format!("c={},r={nonce}", STANDARD.encode(GS2_HEADER));
        let auth_message = format!("n=,r={},{server_first},{without_proof}", self.nonce);
        let stored_key: [u8; 32] = Sha256::digest(keys.client).into();
        let signature = hmac(&stored_key, auth_message.as_bytes());
        let mut proof = keys.client;
        for (p, s) in proof.iter_mut().zip(signature) {
            *p ^= s;
        }
        self.expect = Some((auth_message, keys.server));
        Ok(format!("{without_proof},p={}", STANDARD.encode(proof)))
    }

    /// Checks the server's final message (`v=<signature>`): only a server that knows the
    /// password's keys can sign this exchange's auth message.
    pub fn verify(&mut self, server_final: &[u8]) -> Result<(), String> {
        let (auth_message, server_key) = self
            .expect
            .take()
            .ok_or_else(|| "the server's final message came before ours".to_string())?;
        let text = std::str::from_utf8(server_final)
            .map_err(|_| "the server's final message is not UTF-8".to_string())?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(format!(
                "the server refused: {}",
                kvbench_wire::kept::clean_detail(e, 100)
            ));
        }
        let verifier = text
            .strip_prefix("v=")
            .map(|v| v.split(',').next().unwrap_or(v))
            .ok_or_else(|| "the server's final message has no verifier".to_string())?;
        let verifier = STANDARD
            .decode(verifier)
            .map_err(|e| format!("the server's verifier is not base64: {e}"))?;
        let mut mac =
            <HmacSha256 as KeyInit>::new_from_slice(&server_key).map_err(|e| e.to_string())?;
        mac.update(auth_message.as_bytes());
        // Constant time.
        mac.verify_slice(&verifier).map_err(|_| {
            "the server's signature does not match: it does not know the password".to_string()
        })
    }
}

/// `r=<nonce>,s=<salt>,i=<iterations>[,extensions]`.
fn parse_server_first(text: &str) -> Result<(&str, &str, u32), String> {
    let mut parts = text.split(',');
    let mut field = |name: &str| {
        parts
            .next()
            .and_then(|p| p.strip_prefix(name))
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("the server's first message has no {name}"))
    };
    if text.starts_with("m=") {
        return Err("the server asks for a SCRAM extension this client does not know".into());
    }
    let nonce = field("r=")?;
    let salt = field("s=")?;
    let iterations = field("i=")?
        .parse::<u32>()
        .ok()
        .filter(|i| *i > 0)
        .ok_or_else(|| "the server's iteration count is not a positive number".to_string())?;
    if nonce
        .bytes()
        .any(|b| !(0x21..=0x7e).contains(&b) || b == b',')
    {
        return Err("the server's nonce has characters SCRAM does not allow".into());
    }
    Ok((nonce, salt, iterations))
}

/// SASLprep when the password is UTF-8 that it accepts, else the bytes as they are (PostgreSQL
/// does the same: its passwords need be neither).
fn normalize(password: &[u8], nfkc: Nfkc) -> Vec<u8> {
    match std::str::from_utf8(password).map(|p| saslprep(p, nfkc)) {
        Ok(Some(p)) => p.into_owned().into_bytes(),
        _ => password.to_vec(),
    }
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length: never fails (and never a panic on the request path).
    let Ok(mut mac) = <HmacSha256 as KeyInit>::new_from_slice(key) else {
        return [0; 32];
    };
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// `Hi()`: PBKDF2-HMAC-SHA-256 with one 32-byte block. The keyed HMAC state is made once and
/// cloned for each iteration (two SHA-256 compressions an iteration, not four).
fn hi(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let Ok(keyed) = <HmacSha256 as KeyInit>::new_from_slice(password) else {
        return [0; 32];
    };
    let mut mac = keyed.clone();
    mac.update(salt);
    mac.update(&1u32.to_be_bytes());
    let mut u: [u8; 32] = mac.finalize().into_bytes().into();
    let mut out = u;
    for _ in 1..iterations {
        let mut mac = keyed.clone();
        mac.update(&u);
        u = mac.finalize().into_bytes().into();
        for (o, x) in out.iter_mut().zip(u) {
            *o ^= x;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's example exchange (user "user", password "pencil"): its client proof and
    /// server signature from the keys this derives.
    #[test]
    fn the_rfc_7677_example() {
        let cache = KeyCache::new();
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let keys = cache.keys(&normalize(b"pencil", nfkc_tables), &salt, 4096);
        let auth_message = "n=user,r=rOprNGfwEbeRWgbNEkqO,\
            r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,\
            c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let stored_key: [u8; 32] = Sha256::digest(keys.client).into();
        let mut proof = keys.client;
        for (p, s) in proof
            .iter_mut()
            .zip(hmac(&stored_key, auth_message.as_bytes()))
        {
            *p ^= s;
        }
        assert_eq!(
            STANDARD.encode(proof),
            "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(
            STANDARD.encode(hmac(&keys.server, auth_message.as_bytes())),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        let s = Scram::with_nonce("rOprNGfwEbeRWgbNEkqO".into());
        assert_eq!(s.client_first(), "n,,n=,r=rOprNGfwEbeRWgbNEkqO");
    }

    /// The same exchange as rust-postgres's postgres-protocol, byte for byte, and a server
    /// signature only the password's keys make.
    #[test]
    fn agrees_with_postgres_protocol_and_checks_the_server() {
        use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
        let cache = KeyCache::new();
        for password in ["pencil", "pässwörd", "I\u{2168}", ""] {
            // postgres-protocol picks its own nonce: ours takes the one it sent.
            let mut theirs = ScramSha256::new(password.as_bytes(), ChannelBinding::unsupported());
            let first = String::from_utf8(theirs.message().to_vec()).unwrap();
            let nonce = first.strip_prefix("n,,n=,r=").unwrap().to_string();
            let mut ours = Scram::with_nonce(nonce.clone());
            assert_eq!(ours.client_first(), first);
            let server_first = format!("r={nonce}srv,s=QSXCR+Q6sek8bf92,i=4096");
            theirs.update(server_first.as_bytes()).unwrap();
            let expected = String::from_utf8(theirs.message().to_vec()).unwrap();
            assert_eq!(
                ours.client_final(
                    password.as_bytes(),
                    server_first.as_bytes(),
                    &cache,
                    nfkc_tables
                )
                .unwrap(),
                expected,
                "{password:?}"
            );
            // The server's signature, as a server that knows the password makes it.
            let (auth_message, server_key) = ours.expect.clone().unwrap();
            let v = STANDARD.encode(hmac(&server_key, auth_message.as_bytes()));
            assert!(ours.verify(format!("v={v}").as_bytes()).is_ok());
            // One that does not know it.
            let mut again = Scram::with_nonce(nonce.clone());
            again
                .client_final(
                    password.as_bytes(),
                    server_first.as_bytes(),
                    &cache,
                    nfkc_tables,
                )
                .unwrap();
            let forged = STANDARD.encode([7u8; 32]);
            let e = again.verify(format!("v={forged}").as_bytes()).unwrap_err();
            assert!(e.contains("does not match"), "{e}");
        }
        // Four passwords, each derived once although used twice.
        assert_eq!(cache.derivations(), 4);
    }

    /// SASLprep with the platform's NFKC gives what `stringprep::saslprep` gives, on RFC 4013's
    /// examples and on strings drawn from characters that exercise every step: mapped, spaces,
    /// compatibility forms, combining marks, prohibited, unassigned, right-to-left and
    /// left-to-right letters.
    #[test]
    fn saslprep_agrees_with_stringprep() {
        // RFC 4013 section 3.
        assert_eq!(saslprep("I\u{00AD}X", nfkc_tables).as_deref(), Some("IX"));
        assert_eq!(saslprep("user", nfkc_tables).as_deref(), Some("user"));
        assert_eq!(saslprep("\u{00AA}", nfkc_tables).as_deref(), Some("a"));
        assert_eq!(saslprep("\u{2168}", nfkc_tables).as_deref(), Some("IX"));
        assert_eq!(saslprep("\u{0007}", nfkc_tables), None);
        assert_eq!(saslprep("\u{0627}\u{0031}", nfkc_tables), None);
        let pool: Vec<char> = "aZ0 ~\u{7f}\u{a0}\u{ad}\u{aa}\u{e9}e\u{301}\u{2168}\u{fb01}\u{ff21}\u{3000}\u{200b}\u{feff}\u{e000}\u{fffe}\u{221}\u{627}\u{5d0}\u{200e}\u{e0001}\u{1f600}\u{ac00}\u{1100}\u{1161}"
            .chars()
            .collect();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut refused = 0;
        for _ in 0..20_000 {
            let len = 1 + next(5);
            let s: String = (0..len).map(|_| pool[next(pool.len())]).collect();
            let theirs = stringprep::saslprep(&s).ok().map(|c| c.into_owned());
            let ours = saslprep(&s, nfkc_tables).map(|c| c.into_owned());
            assert_eq!(ours, theirs, "{s:?}");
            refused += usize::from(ours.is_none());
        }
        // Both outcomes were exercised.
        assert!(refused > 1_000 && refused < 19_000, "{refused}");
    }

    #[test]
    fn keys_are_derived_once_per_password_salt_and_iterations() {
        let cache = KeyCache::new();
        let run = |password: &[u8], salt: &str, i: u32| {
            let mut s = Scram::with_nonce("abc".into());
            let server_first = format!("r=abcdef,s={salt},i={i}");
            s.client_final(password, server_first.as_bytes(), &cache, nfkc_tables)
                .unwrap()
        };
        let a = run(b"secret", "c2FsdA==", 4096);
        assert_eq!(run(b"secret", "c2FsdA==", 4096), a);
        assert_eq!(cache.derivations(), 1);
        run(b"other", "c2FsdA==", 4096);
        run(b"secret", "c2FsdDI=", 4096);
        run(b"secret", "c2FsdA==", 4097);
        assert_eq!(cache.derivations(), 4);
        // Bounded: the oldest goes first.
        for n in 0..CACHE_ENTRIES as u32 {
            run(b"secret", "c2FsdA==", 10 + n);
        }
        assert_eq!(cache.entries.lock().unwrap().len(), CACHE_ENTRIES);
        let before = cache.derivations();
        run(b"secret", "c2FsdA==", 4096);
        assert_eq!(cache.derivations(), before + 1, "evicted, derived again");
    }

    #[test]
    fn a_hostile_server_first_message_is_refused_by_name() {
        let cache = KeyCache::new();
        let cases: [(&[u8], &str); 9] = [
            (b"r=xyz,s=c2FsdA==,i=4096", "does not extend ours"),
            (b"r=abc,s=c2FsdA==,i=4096", "does not extend ours"),
            (b"r=abcd,s=c2FsdA==,i=100001", "over the 100000"),
            (b"r=abcd,s=c2FsdA==,i=0", "not a positive number"),
            (b"r=abcd,s=c2FsdA==,i=x", "not a positive number"),
            (b"r=abcd,s=!!,i=1", "not base64"),
            (b"r=abcd,i=1", "has no s="),
            (b"m=ext,r=abcd,s=c2FsdA==,i=1", "extension"),
            (b"r=ab\xffcd", "not UTF-8"),
        ];
        for (message, expected) in cases {
            let mut s = Scram::with_nonce("abc".into());
            let e = s
                .client_final(b"pw", message, &cache, nfkc_tables)
                .unwrap_err();
            assert!(
                e.contains(expected),
                "{:?}: {e}",
                String::from_utf8_lossy(message)
            );
        }
        assert_eq!(
            cache.derivations(),
            0,
            "nothing derived for a refused message"
        );
        let mut early = Scram::with_nonce("abc".into());
        assert!(early.verify(b"v=AAAA").is_err());
        let mut s = Scram::with_nonce("abc".into());
        s.client_final(b"pw", b"r=abcd,s=c2FsdA==,i=1", &cache, nfkc_tables)
            .unwrap();
        let e = s.verify(b"e=invalid-proof").unwrap_err();
        assert!(e.contains("the server refused: invalid-proof"), "{e}");
    }

    #[test]
    fn hi_is_pbkdf2() {
        // RFC 7914's PBKDF2-HMAC-SHA-256 vector: P="passwd", S="salt", c=1, first 32 bytes.
        let expected = "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc";
        let got: String = hi(b"passwd", b"salt", 1)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(got, expected);
    }
}
