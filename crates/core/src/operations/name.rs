//! A name that becomes part of a Durable Object's name — a run id (`runs`), a member label
//! (`fleet`) — checked once for both.

use crate::error::ParamError;

/// A name that becomes part of an object's name (a run id, a member label): 1 to `max`
/// characters of `A-Z a-z 0-9` and `extra`.
pub fn parse_name(
    parameter: &str,
    what: &str,
    text: &str,
    max: usize,
    extra: &[u8],
) -> Result<String, ParamError> {
    let allowed: Vec<String> = extra.iter().map(|b| format!("'{}'", *b as char)).collect();
    if text.is_empty() || text.len() > max {
        return Err(ParamError::new(
            parameter,
            format!("a {what} is 1 to {max} characters"),
        ));
    }
    if !text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
    {
        return Err(ParamError::new(
            parameter,
            format!(
                "a {what} is made of A-Z, a-z, 0-9 and {}",
                allowed.join(", ")
            ),
        ));
    }
    Ok(text.to_string())
}
