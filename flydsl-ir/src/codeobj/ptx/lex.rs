//! A small PTX tokenizer: words, single-character punctuation and strings, with line numbers;
//! comments are dropped.

use super::error::PtxError;

/// One token and the 1-based line it starts on.
pub(super) struct Tok {
    pub text: String,
    pub line: usize,
}

const PUNCT: &str = "(){}[],;:<>=+-*/@!|&^~?";

/// Split `text` into tokens.
pub(super) fn lex(text: &str) -> Result<Vec<Tok>, PtxError> {
    let mut toks = Vec::new();
    let mut line = 1usize;
    let mut chars = text.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        if c == '\n' {
            line += 1;
            chars.next();
        } else if c.is_whitespace() {
            chars.next();
        } else if text[i..].starts_with("//") {
            while chars.peek().is_some_and(|&(_, c)| c != '\n') {
                chars.next();
            }
        } else if text[i..].starts_with("/*") {
            let start = line;
            chars.next();
            chars.next();
            let mut closed = false;
            while let Some((j, c)) = chars.next() {
                if c == '\n' {
                    line += 1;
                } else if c == '*' && text[j..].starts_with("*/") {
                    chars.next();
                    closed = true;
                    break;
                }
            }
            if !closed {
                return Err(PtxError {
                    line: start,
                    message: "unclosed `/*` comment".into(),
                });
            }
        } else if c == '"' {
            let start = line;
            chars.next();
            let mut s = String::from('"');
            let mut closed = false;
            for (_, c) in chars.by_ref() {
                s.push(c);
                if c == '\n' {
                    line += 1;
                } else if c == '"' {
                    closed = true;
                    break;
                }
            }
            if !closed {
                return Err(PtxError {
                    line: start,
                    message: "unclosed string".into(),
                });
            }
            toks.push(Tok {
                text: s,
                line: start,
            });
        } else if PUNCT.contains(c) {
            chars.next();
            toks.push(Tok {
                text: c.to_string(),
                line,
            });
        } else {
            let mut s = String::new();
            while let Some(&(_, c)) = chars.peek() {
                if c.is_whitespace() || PUNCT.contains(c) || c == '"' {
                    break;
                }
                s.push(c);
                chars.next();
            }
            toks.push(Tok { text: s, line });
        }
    }
    Ok(toks)
}
