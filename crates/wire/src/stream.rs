//! A stream of kept answers: NDJSON [`Kept`] lines, then `{"end":true,"lines":N,"keep_failed":F}`
//! when complete or `{"error":"…"}` when stopped early (neither: cut short). [`Reader`] is its one
//! reader, checking the end line's count against the lines that arrived.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::kept::Kept;
use crate::text::Name;

/// A stream's control line.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Control<'a> {
    /// `true` on the last line of a complete stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<bool>,
    /// On the end line: the kept lines the stream carried before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
    /// On the end line: the answers whose keep failed (in no line of the stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_failed: Option<u64>,
    /// On the last line of a stream that stopped early: why.
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    pub error: Option<Name<'a>>,
}

impl Control<'_> {
    /// The end line of a complete stream of `lines` kept lines and `keep_failed` answers that
    /// could not be kept, without its newline.
    pub fn end_line(lines: u64, keep_failed: u64) -> String {
        Control {
            end: Some(true),
            lines: Some(lines),
            keep_failed: Some(keep_failed),
            error: None,
        }
        .to_line()
    }

    /// The last line of a stream that stopped early, without its newline.
    pub fn error_line(message: &str) -> String {
        Control {
            error: Some(message.into()),
            ..Control::default()
        }
        .to_line()
    }

    fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// One line of a stream, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame<'a> {
    Kept(Kept<'a>),
    /// The end line, with its count and the keeps that failed.
    End {
        lines: Option<u64>,
        keep_failed: Option<u64>,
    },
    /// The stream stopped early, saying why.
    Stopped(Name<'a>),
}

impl<'a> Frame<'a> {
    /// A kept line, else a control line; a line that is neither is the kept line's error.
    pub fn parse(line: &'a [u8]) -> Result<Frame<'a>, serde_json::Error> {
        match Kept::parse(line) {
            Ok(kept) => Ok(Frame::Kept(kept)),
            Err(not_kept) => match serde_json::from_slice::<Control<'a>>(line) {
                Ok(Control {
                    end: Some(true),
                    lines,
                    keep_failed,
                    ..
                }) => Ok(Frame::End { lines, keep_failed }),
                Ok(Control {
                    error: Some(message),
                    ..
                }) => Ok(Frame::Stopped(message)),
                _ => Err(not_kept),
            },
        }
    }
}

/// What the reader hands out, line by line.
// Nearly every item is `Kept`: boxing it would allocate per line to shrink the rare others.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Item<'a> {
    Kept(Kept<'a>),
    /// A line that is no kept answer (counted among the stream's lines all the same).
    Malformed {
        line: &'a [u8],
        error: serde_json::Error,
    },
    /// The stream's error line: it stops here.
    Stopped(Name<'a>),
}

/// Why a stream cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// A line longer than the reader's bound.
    TooLong { max: usize },
    /// A line after the end line.
    AfterEnd,
    /// The end line's count disagrees with the lines that arrived: some were lost on the way.
    Miscount { said: Option<u64>, arrived: u64 },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::TooLong { max } => write!(f, "a line is longer than {max} bytes"),
            ReadError::AfterEnd => f.write_str("a line after the end line"),
            ReadError::Miscount { said, arrived } => write!(
                f,
                "the stream's end line says {} lines were sent, {arrived} arrived: answers were lost on the way",
                said.map_or("no count of".to_string(), |n| n.to_string())
            ),
        }
    }
}

impl std::error::Error for ReadError {}

/// How a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// With its end line, whose count matched: `lines` kept lines, and `keep_failed` answers
    /// the worker could not keep (`None`: a worker that does not count them).
    Complete {
        lines: u64,
        keep_failed: Option<u64>,
    },
    /// Without it: cut short (a last line without its newline is a cut-off one), or stopped by
    /// an error line.
    Short { lines: u64 },
}

/// Reads a stream chunk by chunk.
#[derive(Debug)]
pub struct Reader {
    pending: Vec<u8>,
    max_line: usize,
    lines: u64,
    bytes: u64,
    ended: bool,
    stopped: bool,
    keep_failed: Option<u64>,
}

impl Reader {
    /// A reader refusing lines longer than `max_line` bytes.
    pub fn new(max_line: usize) -> Reader {
        Reader {
            pending: Vec::new(),
            max_line,
            lines: 0,
            bytes: 0,
            ended: false,
            stopped: false,
            keep_failed: None,
        }
    }

    /// Kept lines read so far (malformed ones included).
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Bytes of those lines, each with its newline: what they weigh at rest, about.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Reads the complete lines of `chunk` (with what a previous chunk left), handing each to
    /// `each`; keeps an incomplete last line for the next chunk.
    pub fn push<E: From<ReadError>>(
        &mut self,
        chunk: &[u8],
        mut each: impl FnMut(Item<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            let (line, tail) = rest.split_at(i);
            rest = tail.get(1..).unwrap_or_default();
            if self.pending.is_empty() {
                self.line(line, &mut each)?;
            } else {
                let mut whole = std::mem::take(&mut self.pending);
                whole.extend_from_slice(line);
                let read = self.line(&whole, &mut each);
                whole.clear();
                self.pending = whole;
                read?;
            }
        }
        if self.pending.len() + rest.len() > self.max_line {
            return Err(ReadError::TooLong { max: self.max_line }.into());
        }
        self.pending.extend_from_slice(rest);
        Ok(())
    }

    fn line<E: From<ReadError>>(
        &mut self,
        line: &[u8],
        each: &mut impl FnMut(Item<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if line.len() > self.max_line {
            return Err(ReadError::TooLong { max: self.max_line }.into());
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        if self.ended || self.stopped {
            return Err(ReadError::AfterEnd.into());
        }
        match Frame::parse(line) {
            Ok(Frame::Kept(kept)) => {
                self.lines += 1;
                self.bytes += line.len() as u64 + 1;
                each(Item::Kept(kept))
            }
            Ok(Frame::End {
                lines: said,
                keep_failed,
            }) => {
                if said != Some(self.lines) {
                    return Err(ReadError::Miscount {
                        said,
                        arrived: self.lines,
                    }
                    .into());
                }
                self.ended = true;
                self.keep_failed = keep_failed;
                Ok(())
            }
            Ok(Frame::Stopped(message)) => {
                self.stopped = true;
                each(Item::Stopped(message))
            }
            Err(error) => {
                self.lines += 1;
                self.bytes += line.len() as u64 + 1;
                each(Item::Malformed { line, error })
            }
        }
    }

    /// How the stream ended, once its body is over.
    pub fn finish(self) -> Ending {
        let lines = self.lines;
        if self.ended && self.pending.iter().all(u8::is_ascii_whitespace) {
            Ending::Complete {
                lines,
                keep_failed: self.keep_failed,
            }
        } else {
            Ending::Short { lines }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = r#"{"seq":1,"t_ms":5,"label":"weur","vantage":"hint","answer":{"stores":{}}}"#;

    fn read(chunks: &[&[u8]]) -> Result<(Vec<String>, Ending), ReadError> {
        let mut r = Reader::new(200);
        let mut seen = Vec::new();
        for chunk in chunks {
            r.push(chunk, |item| {
                seen.push(match item {
                    Item::Kept(k) => format!("kept {}", k.label),
                    Item::Malformed { line, .. } => format!("malformed {}", line.len()),
                    Item::Stopped(m) => format!("stopped {m}"),
                });
                Ok::<_, ReadError>(())
            })?;
        }
        Ok((seen, r.finish()))
    }

    #[test]
    fn lines_split_across_chunks_anywhere_read_the_same() {
        let stream = format!("{A}\n{{\"x\":1}}\n\n{A}\n{}\n", Control::end_line(3, 2));
        let whole = read(&[stream.as_bytes()]).unwrap();
        assert_eq!(
            whole,
            (
                vec!["kept weur".into(), "malformed 7".into(), "kept weur".into()],
                Ending::Complete {
                    lines: 3,
                    keep_failed: Some(2)
                }
            )
        );
        for cut in 0..stream.len() {
            let (a, b) = stream.as_bytes().split_at(cut);
            assert_eq!(read(&[a, b]).unwrap(), whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = stream.as_bytes().chunks(1).collect();
        assert_eq!(read(&bytes).unwrap(), whole);
        // What the lines weigh: the kept and malformed ones with their newlines, not the blank
        // line nor the end line.
        let mut r = Reader::new(200);
        for chunk in &bytes {
            r.push(chunk, |_| Ok::<_, ReadError>(())).unwrap();
        }
        assert_eq!(r.bytes(), 2 * (A.len() as u64 + 1) + 8);
    }

    #[test]
    fn short_miscounted_stopped_and_long_streams_say_so() {
        let ok = |s: String| read(&[s.as_bytes()]).unwrap();
        let (_, ending) = ok(format!("{A}\n"));
        assert_eq!(ending, Ending::Short { lines: 1 });
        // An end line cut before its newline: the stream was cut there.
        let (_, ending) = ok(format!("{A}\n{}", Control::end_line(1, 0)));
        assert_eq!(ending, Ending::Short { lines: 1 });
        let (seen, ending) = ok(format!("{A}\n{}\n", Control::error_line("page 3 failed")));
        assert_eq!(seen.last().unwrap(), "stopped page 3 failed");
        assert_eq!(ending, Ending::Short { lines: 1 });
        let err = |s: String| read(&[s.as_bytes()]).unwrap_err();
        assert_eq!(
            err(format!("{A}\n{}\n", Control::end_line(2, 0))),
            ReadError::Miscount {
                said: Some(2),
                arrived: 1
            }
        );
        assert_eq!(
            err(format!("{}\n{A}\n", Control::end_line(0, 0))),
            ReadError::AfterEnd
        );
        assert_eq!(
            err(format!("{A}{}\n", " ".repeat(300))),
            ReadError::TooLong { max: 200 }
        );
        assert_eq!(err("x".repeat(201)), ReadError::TooLong { max: 200 });
    }

    #[test]
    fn control_lines_have_one_shape() {
        assert_eq!(
            Control::end_line(3, 1),
            r#"{"end":true,"lines":3,"keep_failed":1}"#
        );
        assert_eq!(Control::error_line("why"), r#"{"error":"why"}"#);
        // An older worker's end line counts no failed keeps.
        assert_eq!(
            Frame::parse(br#"{"end":true,"lines":3}"#).unwrap(),
            Frame::End {
                lines: Some(3),
                keep_failed: None
            }
        );
        let (_, ending) =
            read(&[format!("{A}\n{{\"end\":true,\"lines\":1}}\n").as_bytes()]).unwrap();
        assert_eq!(
            ending,
            Ending::Complete {
                lines: 1,
                keep_failed: None
            }
        );
        assert!(Frame::parse(br#"{"end":false}"#).is_err());
    }
}
