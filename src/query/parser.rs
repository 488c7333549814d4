//! Lexer and parser: query text to an AST, or an error naming the span, what was found and what
//! was expected. The grammar (keywords are case-insensitive; `//` starts a comment):
//!
//! ```text
//! query    := search* match+ [WHERE expr] RETURN [DISTINCT] item (',' item)*
//!             [ORDER BY expr [ASC|DESC] (',' expr [ASC|DESC])*] [LIMIT expr]
//! search   := SEARCH var FOR expr [LIMIT int]                      -- loci extension
//! match    := MATCH pattern (',' pattern)*
//! pattern  := [var '='] node (rel node)*
//! node     := '(' [var] (':' Label ('|' Label)*)? [props] ')'
//! rel      := '-' '[' body ']' '->' | '<-' '[' body ']' '-' | '-' '[' body ']' '-'
//!           | '-->' | '<--' | '--'
//! body     := [var] (':' TYPE ('|' TYPE)*)? [quant] [props]
//! quant    := '{' int ',' int '}' | '{' int '}' | '*' [int] ['..' [int]]
//! props    := '{' name ':' expr (',' name ':' expr)* '}'
//! expr     := or;  or := and (OR and)*;  and := not (AND not)*;  not := NOT not | cmp
//! cmp      := add [(= | <> | < | <= | > | >=) add | IN add | IS [NOT] NULL
//!             | STARTS WITH add | ENDS WITH add | CONTAINS add]
//! add      := mul (('+'|'-') mul)*;  mul := unary (('*'|'/'|'%') unary)*
//! unary    := '-' unary | postfix;   postfix := atom ('.' name)*
//! atom     := int | float (`1.5`, `1e30`, `2.5E-3`) | string | TRUE | FALSE | NULL | $param | var | name '(' args ')'
//!           | count '(' '*' ')' | '[' [expr (',' expr)*] ']' | '(' expr ')'
//! ```
//!
//! Strings are in single or double quotes; the escapes are `\n`, `\t`, `\\`, `\'` and `\"`,
//! and any other backslash sequence is a parse error. A name is a Unicode identifier (XID, as
//! in Rust: `n.名前`), or any text in backticks. `-9223372036854775808` is `i64::MIN`: its
//! magnitude is lexed apart, as it fits 64 bits only negated.
//!
//! Aggregates (`count`, `min`, `max`, `sum`, `avg`, `collect`) are whole RETURN items; the
//! other items group the rows, as in Cypher.
//!
//! `n.x` reads a built-in field first (`key`, `name`, `label`, `x`/`y`/`z` of the anchor block,
//! ...); `prop(n, 'x')` reads the user property `x` of a node, edge or event payload only, so a
//! property that shares a built-in field's name stays readable (loci extension).
//!
//! Limits: a query is at most [`MAX_QUERY_BYTES`] (64 KiB) long and nests at most
//! [`MAX_DEPTH`] (128) levels, counting parentheses, lists, call arguments, `NOT`, unary `-`,
//! `.` property chains and each further operand of a chained `OR`/`AND`/`+`/`*`. Deeper text is
//! a parse error at the token that goes too deep; the bound keeps every recursive walk of the
//! tree (planning, evaluation, printing, dropping) within a small thread stack.

use serde::Serialize;

/// Longest query text accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 64 * 1024;
/// Deepest expression nesting accepted (see the module documentation for what counts).
pub const MAX_DEPTH: usize = 128;

/// Byte range in the query text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// A parse error: where, what was found, what was expected.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    pub span: Span,
    pub found: String,
    pub expected: String,
}

impl ParseError {
    /// "line L, column C" of the error's start in `text`.
    pub fn position(&self, text: &str) -> (usize, usize) {
        self.span.position(text)
    }
}

impl Span {
    /// "line L, column C" (1-based, columns in characters) of the span's start in `text`.
    pub fn position(&self, text: &str) -> (usize, usize) {
        let mut start = self.start.min(text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let before = &text[..start];
        let line = before.matches('\n').count() + 1;
        let col = before
            .rsplit('\n')
            .next()
            .map(|l| l.chars().count())
            .unwrap_or(0)
            + 1;
        (line, col)
    }
}

/// Where each use of a name in an expression (a variable, a function) stands in the text, so
/// that an error found in planning points at it as a parse error does; and where the clauses
/// whose expressions are checked as a whole stand.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Places {
    /// (whether a function, name, where used), each use.
    names: Vec<(bool, String, Span)>,
    /// Where LIMIT's expression stands.
    pub limit: Option<Span>,
    /// Where WHERE's condition stands.
    pub filter: Option<Span>,
    /// Where each ORDER BY expression stands.
    pub order: Vec<Span>,
    /// Each parameter's uses, by name.
    params: Vec<(String, Span)>,
}

impl Places {
    fn note(&mut self, function: bool, name: &str, span: Span) {
        self.names.push((function, name.to_string(), span));
    }

    /// Where the parameter `$name` is first used, if it is.
    pub fn of_param(&self, name: &str) -> Option<Span> {
        self.params
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, s)| *s)
            .min_by_key(|s| s.start)
    }

    /// Where the variable `name` is first used in an expression, if it is.
    pub fn of_var(&self, name: &str) -> Option<Span> {
        self.find(false, name, None)
    }

    /// Where the variable `name` is first used inside `within` (anywhere without it).
    pub fn of_var_in(&self, name: &str, within: Option<Span>) -> Option<Span> {
        self.find(false, name, within)
    }

    /// Where the function `name` is first called inside `within` (anywhere without it).
    pub fn of_call_in(&self, name: &str, within: Option<Span>) -> Option<Span> {
        self.find(true, name, within)
    }

    /// The first use in the text (calls are noted after their arguments).
    fn find(&self, function: bool, name: &str, within: Option<Span>) -> Option<Span> {
        self.names
            .iter()
            .filter(|(f, n, s)| {
                *f == function
                    && n == name
                    && within.is_none_or(|w| w.start <= s.start && s.end <= w.end)
            })
            .map(|(_, _, s)| *s)
            .min_by_key(|s| s.start)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Int(i64),
    /// 9223372036854775808, an integer that fits 64 bits only negated: -9223372036854775808
    /// is `i64::MIN`, and the minus is a token of its own.
    MinMagnitude,
    Float(f64),
    Str(String),
    Param(String),
    Sym(&'static str),
    End,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Ident(s) if is_reserved(s) => format!("keyword {}", s.to_ascii_uppercase()),
            Tok::Ident(s) => format!("{s:?}"),
            Tok::Int(i) => i.to_string(),
            Tok::MinMagnitude => MIN_MAGNITUDE.into(),
            Tok::Float(f) => f.to_string(),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::Param(p) => format!("${p}"),
            Tok::Sym(s) => format!("'{s}'"),
            Tok::End => "end of query".into(),
        }
    }
}

/// What a query of nothing but blanks is said to be.
pub(crate) const EMPTY_QUERY: &str = "an empty query";

/// The magnitude of `i64::MIN`, as written.
const MIN_MAGNITUDE: &str = "9223372036854775808";
/// What a number too large for 64 bits is told.
const FITS_64_BITS: &str = "an integer that fits 64 bits";

/// Whether `c` may start a bare name: Unicode's identifier start (as Rust and openCypher take
/// it, so `n.名前` and `(é)` need no backticks), `_`, or `$` for a parameter.
fn starts_name(c: char) -> bool {
    c == '_' || c == '$' || unicode_ident::is_xid_start(c)
}

/// Whether `c` may go on a bare name.
fn continues_name(c: char) -> bool {
    unicode_ident::is_xid_continue(c)
}

const SYMBOLS: &[&str] = &[
    "<>", "<=", ">=", "..", "(", ")", "[", "]", "{", "}", ":", ",", ".", "|", "-", ">", "<", "=",
    "+", "*", "/", "%",
];

/// What a character no token starts with is told: every symbol, from the list the lexer
/// matches (a list written out had left `%` out), the one-character ones first.
#[cold]
fn expected_symbol() -> String {
    let mut symbols = SYMBOLS.to_vec();
    symbols.sort_by_key(|s| s.len());
    format!(
        "a name, number, string, parameter or one of {}",
        symbols.join(" ")
    )
}

fn lex(text: &str) -> Result<Vec<(Tok, Span)>, ParseError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    // A byte-order mark an editor put before the text is no part of it (a saved query's file
    // skips it too); spans stay offsets into `text`.
    if text.starts_with('\u{feff}') {
        i = '\u{feff}'.len_utf8();
    }
    while i < bytes.len() {
        let c = text[i..].chars().next().unwrap_or(' ');
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if text[i..].starts_with("//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        if starts_name(c) || c == '`' {
            if c == '`' {
                // `quoted identifier`
                let end = text[i + 1..].find('`').ok_or(ParseError {
                    span: Span {
                        start,
                        end: text.len(),
                    },
                    found: "an unterminated `quoted name`".into(),
                    expected: "a closing `".into(),
                })?;
                if end == 0 {
                    return Err(ParseError {
                        span: Span {
                            start,
                            end: start + 2,
                        },
                        found: "an empty quoted name ``".into(),
                        expected: "a name between the backticks".into(),
                    });
                }
                out.push((
                    Tok::Ident(text[i + 1..i + 1 + end].to_string()),
                    Span {
                        start,
                        end: i + end + 2,
                    },
                ));
                i += end + 2;
                continue;
            }
            i += c.len_utf8();
            while let Some(next) = text[i..].chars().next().filter(|&n| continues_name(n)) {
                i += next.len_utf8();
            }
            let word = &text[start..i];
            let tok = match word.strip_prefix('$') {
                Some("") => {
                    return Err(ParseError {
                        span: Span { start, end: i },
                        found: "'$'".into(),
                        expected: "a parameter name after '$'".into(),
                    })
                }
                Some(p) => Tok::Param(p.to_string()),
                None => Tok::Ident(word.to_string()),
            };
            out.push((tok, Span { start, end: i }));
            continue;
        }
        if c.is_ascii_digit() {
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let mut float = false;
            // "1..3" is a range, not a float.
            if i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
                float = true;
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            // An exponent (`1e30`, `2.5E-3`), as floats are printed.
            if i < bytes.len() && matches!(bytes[i], b'e' | b'E') {
                let sign = usize::from(matches!(bytes.get(i + 1), Some(b'+' | b'-')));
                if bytes.get(i + 1 + sign).is_some_and(u8::is_ascii_digit) {
                    float = true;
                    i += 1 + sign;
                    while i < bytes.len() && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let s = &text[start..i];
            let span = Span { start, end: i };
            let tok = if float {
                Tok::Float(
                    s.parse()
                        .ok()
                        .filter(|f: &f64| f.is_finite())
                        .ok_or_else(|| ParseError {
                            span,
                            found: s.into(),
                            expected: "a number within the range of a 64-bit float".into(),
                        })?,
                )
            } else if s == MIN_MAGNITUDE {
                Tok::MinMagnitude
            } else {
                Tok::Int(s.parse().map_err(|_| ParseError {
                    span,
                    found: s.into(),
                    expected: FITS_64_BITS.into(),
                })?)
            };
            out.push((tok, span));
            continue;
        }
        if c == '\'' || c == '"' {
            let mut s = String::new();
            i += 1;
            let mut closed = false;
            while i < bytes.len() {
                let ch = text[i..].chars().next().unwrap_or(' ');
                if ch == c {
                    closed = true;
                    i += 1;
                    break;
                }
                if ch == '\\' && i + 1 < bytes.len() {
                    let next = text[i + 1..].chars().next().unwrap_or(' ');
                    // Only the escapes the grammar documents; any other is a mistake (`\u0000`
                    // silently becoming "u0000" would match nothing, and say nothing).
                    s.push(match next {
                        'n' => '\n',
                        't' => '\t',
                        '\\' | '\'' | '"' => next,
                        _ => {
                            return Err(ParseError {
                                span: Span {
                                    start: i,
                                    end: i + 1 + next.len_utf8(),
                                },
                                found: format!("the escape \\{next}"),
                                expected: "a string escape: \\n, \\t, \\\\, \\' or \\\"".into(),
                            })
                        }
                    });
                    i += 1 + next.len_utf8();
                    continue;
                }
                s.push(ch);
                i += ch.len_utf8();
            }
            if !closed {
                return Err(ParseError {
                    span: Span {
                        start,
                        end: text.len(),
                    },
                    found: "an unterminated string".into(),
                    expected: format!("a closing {c}"),
                });
            }
            out.push((Tok::Str(s), Span { start, end: i }));
            continue;
        }
        match SYMBOLS.iter().find(|s| text[i..].starts_with(**s)) {
            Some(s) => {
                out.push((
                    Tok::Sym(s),
                    Span {
                        start,
                        end: i + s.len(),
                    },
                ));
                i += s.len();
            }
            None => {
                let ch = text[i..].chars().next().unwrap_or(' ');
                return Err(ParseError {
                    span: Span {
                        start,
                        end: i + ch.len_utf8(),
                    },
                    found: format!("{ch:?}"),
                    expected: expected_symbol(),
                });
            }
        }
    }
    // "End of query" is where the text ends, not after trailing blank lines.
    let end = text.trim_end().len();
    out.push((Tok::End, Span { start: end, end }));
    Ok(out)
}

/// A literal value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Literal {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    StartsWith,
    EndsWith,
    Contains,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

/// Where a call stands in the text, for an error about it. Equal to any other: a place takes
/// no part in an expression's equality (`ORDER BY count(x)` is RETURN's `count(x)` written
/// again).
/// Held as two `u32`s (a query is at most 64 KiB), and the call's arguments as a boxed slice,
/// so that an `Expr` is no larger for it: 8 bytes more made the parser's frames deeper, and 128
/// levels of nesting overflowed a 2 MiB thread's stack in a debug build.
#[derive(Clone, Copy, Debug, Default)]
pub struct At {
    start: u32,
    end: u32,
}

impl At {
    pub fn new(span: Span) -> At {
        let narrow = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        At {
            start: narrow(span.start),
            end: narrow(span.end),
        }
    }

    pub fn span(self) -> Span {
        Span {
            start: self.start as usize,
            end: self.end as usize,
        }
    }
}

impl PartialEq for At {
    fn eq(&self, _: &At) -> bool {
        true
    }
}

/// An expression.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Expr {
    Lit(Literal),
    Param(String),
    Var(String),
    Prop(Box<Expr>, String),
    /// A call, its arguments boxed as a slice (with the place, a `Vec` made every `Expr`, and
    /// the parser's frames with it, larger: see [`At`]).
    Call(String, Box<[Expr]>, #[serde(skip)] At),
    List(Vec<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    IsNull(Box<Expr>, bool),
    Bin(BinOp, Box<Expr>, Box<Expr>),
}

/// Edge direction in a pattern, as written left to right.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Dir {
    Right,
    Left,
    Either,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodePat {
    pub var: Option<String>,
    pub labels: Vec<String>,
    pub props: Vec<(String, Expr)>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RelPat {
    pub var: Option<String>,
    pub types: Vec<String>,
    pub dir: Dir,
    pub min: u32,
    pub max: Option<u32>,
    pub props: Vec<(String, Expr)>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PathPat {
    pub var: Option<String>,
    pub start: NodePat,
    pub steps: Vec<(RelPat, NodePat)>,
    /// Which MATCH clause the pattern is in, counted from 0: relations are distinct edges
    /// within a clause, not across clauses.
    pub clause: usize,
    /// From the path variable (or the first node) to the last node.
    pub span: Span,
}

impl PathPat {
    /// The path's node patterns, first to last.
    pub fn nodes(&self) -> impl Iterator<Item = &NodePat> {
        std::iter::once(&self.start).chain(self.steps.iter().map(|(_, n)| n))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Search {
    pub var: String,
    pub text: Expr,
    pub limit: Option<u64>,
    pub span: Span,
    /// Of the text alone.
    pub text_span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReturnItem {
    pub expr: Expr,
    pub alias: String,
    /// From the expression to its alias.
    pub span: Span,
}

/// A parsed query.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Query {
    pub searches: Vec<Search>,
    pub patterns: Vec<PathPat>,
    pub filter: Option<Expr>,
    pub distinct: bool,
    pub items: Vec<ReturnItem>,
    pub order: Vec<(Expr, bool)>,
    pub limit: Option<Expr>,
    /// Where the names its expressions use stand in the text.
    #[serde(skip)]
    pub places: Places,
}

struct Parser<'a> {
    text: &'a str,
    toks: Vec<(Tok, Span)>,
    pos: usize,
    /// Current expression nesting, bounded by [`MAX_DEPTH`].
    depth: usize,
    places: Places,
}

/// Parses query text.
pub fn parse(text: &str) -> Result<Query, ParseError> {
    if text.len() > MAX_QUERY_BYTES {
        let mut start = MAX_QUERY_BYTES;
        // Spans are sliced by `position`, so they must fall on character boundaries.
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        return Err(ParseError {
            span: Span {
                start,
                end: text.len(),
            },
            found: format!("a query of {} bytes", text.len()),
            expected: format!("a query of at most {MAX_QUERY_BYTES} bytes"),
        });
    }
    let mut p = Parser {
        text,
        toks: lex(text)?,
        pos: 0,
        depth: 0,
        places: Places::default(),
    };
    p.query()
}

impl<'a> Parser<'a> {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }
    fn peek_at(&self, n: usize) -> &Tok {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)].0
    }
    fn span(&self) -> Span {
        self.toks[self.pos].1
    }
    fn bump(&mut self) -> (Tok, Span) {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }
    fn err<T>(&self, expected: &str) -> Result<T, ParseError> {
        // A blank query has only its end, and "found end of query" under a blank line read
        // as if something had been cut off.
        let found = if self.toks.len() == 1 {
            EMPTY_QUERY.to_string()
        } else {
            self.peek().describe()
        };
        Err(ParseError {
            span: self.span(),
            found,
            expected: expected.to_string(),
        })
    }
    /// One level deeper; an error at the current token past [`MAX_DEPTH`]. Callers restore
    /// `depth` on success only: an error ends the parse.
    fn deeper(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(&format!(
                "at most {MAX_DEPTH} levels of nesting (parentheses, lists, NOT, '-', chained operators)"
            ));
        }
        Ok(())
    }
    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s.eq_ignore_ascii_case(kw))
    }
    fn kw_at(&self, n: usize, kw: &str) -> bool {
        matches!(self.peek_at(n), Tok::Ident(s) if s.eq_ignore_ascii_case(kw))
    }
    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn expect_kw(&mut self, kw: &str) -> Result<(), ParseError> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            self.err(kw)
        }
    }
    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }
    fn eat_sym(&mut self, s: &str) -> bool {
        if self.is_sym(s) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn expect_sym(&mut self, s: &str) -> Result<Span, ParseError> {
        if self.is_sym(s) {
            Ok(self.bump().1)
        } else {
            self.err(&format!("'{s}'"))
        }
    }
    fn name(&mut self, what: &str) -> Result<String, ParseError> {
        match self.peek().clone() {
            Tok::Ident(s) if !is_reserved(&s) => {
                self.bump();
                Ok(s)
            }
            _ => self.err(what),
        }
    }
    /// A label, type or property name: reserved words are allowed here.
    fn any_name(&mut self, what: &str) -> Result<String, ParseError> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                self.bump();
                Ok(s)
            }
            _ => self.err(what),
        }
    }

    fn query(&mut self) -> Result<Query, ParseError> {
        let mut searches = Vec::new();
        while self.is_kw("SEARCH") {
            let start = self.bump().1;
            let var = self.name("a variable name after SEARCH")?;
            self.expect_kw("FOR")?;
            let text_start = self.span().start;
            let text = self.expr()?;
            let text_span = self.since(text_start);
            let limit = if self.is_kw("LIMIT") && !self.kw_at(1, "MATCH") {
                self.bump();
                match self.bump() {
                    (Tok::Int(n), _) if n > 0 => Some(n as u64),
                    (t, span) => {
                        return Err(ParseError {
                            span,
                            found: t.describe(),
                            expected: "a positive integer".into(),
                        })
                    }
                }
            } else {
                None
            };
            let end = self.toks[self.pos.saturating_sub(1)].1;
            searches.push(Search {
                var,
                text,
                limit,
                span: Span {
                    start: start.start,
                    end: end.end,
                },
                text_span,
            });
        }
        let mut patterns = Vec::new();
        if !self.is_kw("MATCH") {
            return self.err("SEARCH or MATCH");
        }
        let mut clause = 0;
        while self.eat_kw("MATCH") {
            patterns.push(self.path(clause)?);
            while self.eat_sym(",") {
                patterns.push(self.path(clause)?);
            }
            clause += 1;
        }
        let filter = if self.eat_kw("WHERE") {
            let start = self.span().start;
            let e = self.expr()?;
            self.places.filter = Some(self.since(start));
            Some(e)
        } else {
            None
        };
        if !self.is_kw("RETURN") {
            return self.err(if filter.is_none() {
                "MATCH, WHERE or RETURN"
            } else {
                "RETURN (or AND/OR to continue the condition)"
            });
        }
        self.bump();
        let distinct = self.eat_kw("DISTINCT");
        let mut items = vec![self.item()?];
        while self.eat_sym(",") {
            items.push(self.item()?);
        }
        let mut order = Vec::new();
        if self.eat_kw("ORDER") {
            self.expect_kw("BY")?;
            loop {
                let start = self.span().start;
                let e = self.expr()?;
                let at = self.since(start);
                self.places.order.push(at);
                let desc = if self.eat_kw("DESC") || self.eat_kw("DESCENDING") {
                    true
                } else {
                    if !self.eat_kw("ASC") {
                        self.eat_kw("ASCENDING");
                    }
                    false
                };
                order.push((e, desc));
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        let limit = if self.eat_kw("LIMIT") {
            let start = self.span().start;
            let e = self.expr()?;
            self.places.limit = Some(self.since(start));
            Some(e)
        } else {
            None
        };
        if *self.peek() != Tok::End {
            return self.err(if limit.is_some() {
                "end of query"
            } else {
                "',' , ORDER BY, LIMIT or end of query"
            });
        }
        Ok(Query {
            searches,
            patterns,
            filter,
            distinct,
            items,
            order,
            limit,
            places: std::mem::take(&mut self.places),
        })
    }

    fn item(&mut self) -> Result<ReturnItem, ParseError> {
        let start = self.span().start;
        let expr = self.expr()?;
        let end = self.toks[self.pos.saturating_sub(1)].1.end;
        let alias = if self.eat_kw("AS") {
            self.any_name("a name after AS")?
        } else {
            self.text[start..end].trim().to_string()
        };
        let span = self.since(start);
        Ok(ReturnItem { expr, alias, span })
    }

    /// From `start` to the end of the last token taken.
    fn since(&self, start: usize) -> Span {
        Span {
            start,
            end: self.toks[self.pos.saturating_sub(1)].1.end.max(start),
        }
    }

    fn path(&mut self, clause: usize) -> Result<PathPat, ParseError> {
        let span_start = self.span().start;
        let var =
            if matches!(self.peek(), Tok::Ident(_)) && matches!(self.peek_at(1), Tok::Sym("=")) {
                let v = self.name("a path variable")?;
                self.bump();
                Some(v)
            } else {
                None
            };
        let start = self.node()?;
        let mut steps = Vec::new();
        while self.is_sym("-") || self.is_sym("<") {
            let rel = self.rel()?;
            let node = self.node()?;
            steps.push((rel, node));
        }
        Ok(PathPat {
            var,
            start,
            steps,
            clause,
            span: self.since(span_start),
        })
    }

    fn props(&mut self) -> Result<Vec<(String, Expr)>, ParseError> {
        let mut props = Vec::new();
        if !self.eat_sym("{") {
            return Ok(props);
        }
        if self.eat_sym("}") {
            return Ok(props);
        }
        loop {
            let k = self.any_name("a property name")?;
            self.expect_sym(":")?;
            props.push((k, self.expr()?));
            if self.eat_sym("}") {
                return Ok(props);
            }
            if !self.eat_sym(",") {
                return self.err("',' or '}'");
            }
        }
    }

    fn node(&mut self) -> Result<NodePat, ParseError> {
        let start = self.expect_sym("(")?;
        let var = match self.peek() {
            Tok::Ident(s) if !is_reserved(s) => Some(self.name("a variable")?),
            _ => None,
        };
        let mut labels = Vec::new();
        if self.eat_sym(":") {
            labels.push(self.any_name("a label")?);
            while self.eat_sym("|") {
                labels.push(self.any_name("a label")?);
            }
            // `:A:B` asks Cypher and GQL for both labels, which no node has; it had been
            // read as either.
            if self.is_sym(":") {
                return self.err("'|' between labels (a node has one: `:A|B` matches either)");
            }
        }
        let props = self.props()?;
        if !self.is_sym(")") {
            return self.err(if props.is_empty() {
                "':' label, '{' properties or ')'"
            } else {
                "')'"
            });
        }
        let end = self.bump().1;
        Ok(NodePat {
            var,
            labels,
            props,
            span: Span {
                start: start.start,
                end: end.end,
            },
        })
    }

    fn rel(&mut self) -> Result<RelPat, ParseError> {
        let start = self.span();
        let left = self.eat_sym("<");
        self.expect_sym("-")?;
        let mut rel = RelPat {
            var: None,
            types: Vec::new(),
            dir: Dir::Either,
            min: 1,
            max: Some(1),
            props: Vec::new(),
            span: start,
        };
        if self.eat_sym("[") {
            if let Tok::Ident(s) = self.peek() {
                if !is_reserved(s) {
                    rel.var = Some(self.name("a variable")?);
                }
            }
            if self.eat_sym(":") {
                rel.types.push(self.any_name("a relation type")?);
                while self.eat_sym("|") {
                    self.eat_sym(":");
                    rel.types.push(self.any_name("a relation type")?);
                }
            }
            self.quantifier(&mut rel)?;
            rel.props = self.props()?;
            self.expect_sym("]")?;
        }
        self.expect_sym("-")?;
        let right = self.eat_sym(">");
        rel.dir = match (left, right) {
            (true, false) => Dir::Left,
            (false, true) => Dir::Right,
            (false, false) => Dir::Either,
            (true, true) => {
                return Err(ParseError {
                    span: Span {
                        start: start.start,
                        end: self.toks[self.pos - 1].1.end,
                    },
                    found: "'<-...->'".into(),
                    expected: "one direction: -[]->, <-[]- or -[]-".into(),
                })
            }
        };
        rel.span = Span {
            start: start.start,
            end: self.toks[self.pos - 1].1.end,
        };
        Ok(rel)
    }

    fn int(&mut self, what: &str) -> Result<u32, ParseError> {
        match self.peek().clone() {
            Tok::Int(n) if (0..=u32::MAX as i64).contains(&n) => {
                self.bump();
                Ok(n as u32)
            }
            _ => self.err(what),
        }
    }

    fn quantifier(&mut self, rel: &mut RelPat) -> Result<(), ParseError> {
        let start = self.span();
        if self.is_sym("{") && matches!(self.peek_at(1), Tok::Int(_)) {
            self.bump();
            let m = self.int("a minimum number of hops")?;
            let n = if self.eat_sym(",") {
                if self.is_sym("}") {
                    None
                } else {
                    Some(self.int("a maximum number of hops")?)
                }
            } else {
                Some(m)
            };
            self.expect_sym("}")?;
            rel.min = m;
            rel.max = n;
        } else if self.eat_sym("*") {
            rel.min = 1;
            rel.max = None;
            if let Tok::Int(_) = self.peek() {
                rel.min = self.int("a number of hops")?;
                rel.max = Some(rel.min);
            }
            if self.eat_sym("..") {
                rel.max = if let Tok::Int(_) = self.peek() {
                    Some(self.int("a maximum number of hops")?)
                } else {
                    None
                };
            }
        } else {
            return Ok(());
        }
        if let Some(max) = rel.max {
            if max < rel.min {
                return Err(ParseError {
                    span: Span {
                        start: start.start,
                        end: self.toks[self.pos - 1].1.end,
                    },
                    found: format!("{}..{}", rel.min, max),
                    expected: "a maximum no smaller than the minimum".into(),
                });
            }
        }
        Ok(())
    }

    // A chain `a OR b OR c` is parsed in a loop but builds a left-deep tree, so each further
    // operand counts as a level: the tree's depth, not the parser's, is what later walks recurse
    // over.
    fn expr(&mut self) -> Result<Expr, ParseError> {
        let outer = self.depth;
        self.deeper()?;
        let mut left = self.and()?;
        while self.is_kw("OR") {
            self.deeper()?;
            self.bump();
            left = Expr::Bin(BinOp::Or, Box::new(left), Box::new(self.and()?));
        }
        self.depth = outer;
        Ok(left)
    }
    fn and(&mut self) -> Result<Expr, ParseError> {
        let outer = self.depth;
        let mut left = self.not()?;
        while self.is_kw("AND") {
            self.deeper()?;
            self.bump();
            left = Expr::Bin(BinOp::And, Box::new(left), Box::new(self.not()?));
        }
        self.depth = outer;
        Ok(left)
    }
    fn not(&mut self) -> Result<Expr, ParseError> {
        if self.is_kw("NOT") {
            self.deeper()?;
            self.bump();
            let e = Expr::Not(Box::new(self.not()?));
            self.depth -= 1;
            return Ok(e);
        }
        self.cmp()
    }
    fn cmp(&mut self) -> Result<Expr, ParseError> {
        let left = self.add()?;
        let op = match self.peek() {
            Tok::Sym("=") => Some(BinOp::Eq),
            Tok::Sym("<>") => Some(BinOp::Ne),
            Tok::Sym("<") => Some(BinOp::Lt),
            Tok::Sym("<=") => Some(BinOp::Le),
            Tok::Sym(">") => Some(BinOp::Gt),
            Tok::Sym(">=") => Some(BinOp::Ge),
            _ => None,
        };
        if let Some(op) = op {
            self.bump();
            return Ok(Expr::Bin(op, Box::new(left), Box::new(self.add()?)));
        }
        if self.eat_kw("IN") {
            return Ok(Expr::Bin(BinOp::In, Box::new(left), Box::new(self.add()?)));
        }
        if self.eat_kw("IS") {
            let negated = self.eat_kw("NOT");
            self.expect_kw("NULL")?;
            return Ok(Expr::IsNull(Box::new(left), negated));
        }
        if self.is_kw("STARTS") || self.is_kw("ENDS") {
            let op = if self.eat_kw("STARTS") {
                BinOp::StartsWith
            } else {
                self.bump();
                BinOp::EndsWith
            };
            self.expect_kw("WITH")?;
            return Ok(Expr::Bin(op, Box::new(left), Box::new(self.add()?)));
        }
        if self.eat_kw("CONTAINS") {
            return Ok(Expr::Bin(
                BinOp::Contains,
                Box::new(left),
                Box::new(self.add()?),
            ));
        }
        Ok(left)
    }
    fn add(&mut self) -> Result<Expr, ParseError> {
        let outer = self.depth;
        let mut left = self.mul()?;
        loop {
            if self.is_sym("+") || self.is_sym("-") {
                self.deeper()?;
            }
            let op = if self.eat_sym("+") {
                BinOp::Add
            } else if self.eat_sym("-") {
                BinOp::Sub
            } else {
                self.depth = outer;
                return Ok(left);
            };
            left = Expr::Bin(op, Box::new(left), Box::new(self.mul()?));
        }
    }
    fn mul(&mut self) -> Result<Expr, ParseError> {
        let outer = self.depth;
        let mut left = self.unary()?;
        loop {
            if self.is_sym("*") || self.is_sym("/") || self.is_sym("%") {
                self.deeper()?;
            }
            let op = if self.eat_sym("*") {
                BinOp::Mul
            } else if self.eat_sym("/") {
                BinOp::Div
            } else if self.eat_sym("%") {
                BinOp::Mod
            } else {
                self.depth = outer;
                return Ok(left);
            };
            left = Expr::Bin(op, Box::new(left), Box::new(self.unary()?));
        }
    }
    fn unary(&mut self) -> Result<Expr, ParseError> {
        if self.is_sym("-") && *self.peek_at(1) == Tok::MinMagnitude {
            self.bump();
            self.bump();
            return Ok(Expr::Lit(Literal::Int(i64::MIN)));
        }
        if self.is_sym("-") {
            self.deeper()?;
            self.bump();
            let e = Expr::Neg(Box::new(self.unary()?));
            self.depth -= 1;
            return Ok(e);
        }
        let outer = self.depth;
        let mut e = self.atom()?;
        while self.is_sym(".") {
            self.deeper()?;
            self.bump();
            e = Expr::Prop(Box::new(e), self.any_name("a property name after '.'")?);
        }
        self.depth = outer;
        Ok(e)
    }
    fn atom(&mut self) -> Result<Expr, ParseError> {
        let (tok, span) = (self.peek().clone(), self.span());
        match tok {
            Tok::Int(i) => {
                self.bump();
                Ok(Expr::Lit(Literal::Int(i)))
            }
            Tok::MinMagnitude => Err(ParseError {
                span,
                found: MIN_MAGNITUDE.into(),
                expected: FITS_64_BITS.into(),
            }),
            Tok::Float(f) => {
                self.bump();
                Ok(Expr::Lit(Literal::Float(f)))
            }
            Tok::Str(s) => {
                self.bump();
                Ok(Expr::Lit(Literal::Str(s)))
            }
            Tok::Param(p) => {
                self.bump();
                self.places.params.push((p.clone(), span));
                Ok(Expr::Param(p))
            }
            Tok::Sym("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect_sym(")")?;
                Ok(e)
            }
            Tok::Sym("[") => {
                self.bump();
                let mut items = Vec::new();
                if !self.eat_sym("]") {
                    loop {
                        items.push(self.expr()?);
                        if self.eat_sym("]") {
                            break;
                        }
                        if !self.eat_sym(",") {
                            return self.err("',' or ']'");
                        }
                    }
                }
                Ok(Expr::List(items))
            }
            Tok::Ident(s) => {
                let upper = s.to_ascii_uppercase();
                match upper.as_str() {
                    "TRUE" => {
                        self.bump();
                        return Ok(Expr::Lit(Literal::Bool(true)));
                    }
                    "FALSE" => {
                        self.bump();
                        return Ok(Expr::Lit(Literal::Bool(false)));
                    }
                    "NULL" => {
                        self.bump();
                        return Ok(Expr::Lit(Literal::Null));
                    }
                    _ => {}
                }
                if is_reserved(&s) {
                    return Err(ParseError {
                        span,
                        found: format!("keyword {s}"),
                        expected: "an expression".into(),
                    });
                }
                self.bump();
                if self.eat_sym("(") {
                    // count(*): every row of the group.
                    if self.is_sym("*") && matches!(self.peek_at(1), Tok::Sym(")")) {
                        self.bump();
                        self.bump();
                        self.places.note(true, &s.to_ascii_lowercase(), span);
                        return Ok(Expr::Call(
                            s.to_ascii_lowercase(),
                            Box::default(),
                            At::new(span),
                        ));
                    }
                    let mut args = Vec::new();
                    if !self.eat_sym(")") {
                        loop {
                            args.push(self.expr()?);
                            if self.eat_sym(")") {
                                break;
                            }
                            if !self.eat_sym(",") {
                                return self.err("',' or ')'");
                            }
                        }
                    }
                    let at = self.since(span.start);
                    self.places.note(true, &s.to_ascii_lowercase(), span);
                    return Ok(Expr::Call(
                        s.to_ascii_lowercase(),
                        args.into_boxed_slice(),
                        At::new(at),
                    ));
                }
                self.places.note(false, &s, span);
                Ok(Expr::Var(s))
            }
            _ => self.err("an expression"),
        }
    }
}

fn is_reserved(word: &str) -> bool {
    const RESERVED: &[&str] = &[
        "MATCH",
        "WHERE",
        "RETURN",
        "DISTINCT",
        "AS",
        "ORDER",
        "BY",
        "ASC",
        "DESC",
        "ASCENDING",
        "DESCENDING",
        "LIMIT",
        "AND",
        "OR",
        "NOT",
        "IN",
        "IS",
        "NULL",
        "TRUE",
        "FALSE",
        "SEARCH",
        "FOR",
        "STARTS",
        "ENDS",
        "WITH",
        "CONTAINS",
        "CREATE",
        "DELETE",
        "SET",
        "MERGE",
        "REMOVE",
    ];
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_patterns_quantifiers_and_clauses() {
        let q = parse(
            "SEARCH v FOR $want LIMIT 5 \
             MATCH p = (v:NPC {profession: 'fletcher'})-[o:OFFERS|SELLS]->(i:Item), (v)<-[:PATH{1,3}]-(:Place) \
             WHERE o.confidence >= 0.5 AND NOT i.name IN ['dirt'] \
             RETURN DISTINCT v.name AS villager, confidence(o) ORDER BY o.last_seen DESC, villager LIMIT $k",
        )
        .unwrap();
        assert_eq!(q.searches.len(), 1);
        assert_eq!(q.patterns.len(), 2);
        assert_eq!(q.patterns[0].var.as_deref(), Some("p"));
        let (rel, node) = &q.patterns[0].steps[0];
        assert_eq!(
            (rel.types.clone(), rel.dir, node.labels.clone()),
            (
                vec!["OFFERS".to_string(), "SELLS".to_string()],
                Dir::Right,
                vec!["Item".to_string()]
            )
        );
        let (rel2, _) = &q.patterns[1].steps[0];
        assert_eq!((rel2.dir, rel2.min, rel2.max), (Dir::Left, 1, Some(3)));
        assert!(q.distinct);
        assert_eq!(q.items[1].alias, "confidence(o)");
        assert_eq!(q.order.len(), 2);
        assert!(q.order[0].1);
        let star = parse("MATCH (a)-[*2..]->(b) RETURN b").unwrap();
        assert_eq!(
            (
                star.patterns[0].steps[0].0.min,
                star.patterns[0].steps[0].0.max
            ),
            (2, None)
        );
        let bare = parse("match (a)-->(b)<--(c)--(d) return a").unwrap();
        let dirs: Vec<Dir> = bare.patterns[0].steps.iter().map(|(r, _)| r.dir).collect();
        assert_eq!(dirs, vec![Dir::Right, Dir::Left, Dir::Either]);
    }

    #[test]
    fn errors_say_where_what_and_what_was_expected() {
        let text = "MATCH (a:Place)\nWHERE a.x = \nRETURN a";
        let e = parse(text).unwrap_err();
        assert_eq!(e.expected, "an expression");
        assert_eq!(e.found, "keyword RETURN");
        assert_eq!(e.position(text), (3, 1));
        let e = parse("MATCH (a)-[:R]->(b RETURN b").unwrap_err();
        assert_eq!(e.found, "keyword RETURN");
        assert!(e.expected.contains("')'"), "{}", e.expected);
        let e = parse("MATCH (a)-[*3..1]->(b) RETURN b").unwrap_err();
        assert!(e.expected.contains("no smaller"));
        let e = parse("MATCH (a) RETURN a 'x'").unwrap_err();
        assert_eq!(e.found, "string \"x\"");
        assert!(parse("RETURN 1").is_err());
        assert!(parse("MATCH (a) RETURN \"unterminated").is_err());
        assert!(parse("MATCH (a) RETURN $").is_err());
        assert!(parse("MATCH (a)<-[]->(b) RETURN a").is_err());
        assert!(parse("").is_err());
    }
}
