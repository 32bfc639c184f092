//! No module import cycles in any workspace crate.
//!
//! The crates are the `members` of the workspace `Cargo.toml`; each crate root (`src/lib.rs`,
//! `src/main.rs`, `src/bin/*.rs`) is followed through its `mod name;` declarations (honouring
//! `#[path]`), so new module files are found without listing them here.
//!
//! # The rule
//!
//! - A *module* is a file-level module: `a/b.rs` or `a/b/mod.rs` is `a::b`. Inline modules
//!   (`mod tests { .. }`) belong to their file.
//! - Module `A` *depends on* module `B` when `A`'s code names something that lives in `B`: in a
//!   private `use` (`use crate::b::Item;`, `use super::Item;`, `use crate::b::*;`) or in a
//!   qualified path (`crate::b::f()`, `super::Item`, `child::f()`, or `m::f()` where a `use`
//!   bound `m` to a module). A child naming its parent's items through `super::` depends on
//!   the parent; a parent declaring `mod child;` does not depend on the child.
//! - Re-exports are followed, not counted: a name is followed through every `use` that brings
//!   it into a module (`pub use`, `pub(crate) use`, private `use` alike) to the module that
//!   *defines* it, and the edge goes there. A `pub use` line itself is no edge. So a facade
//!   (a `lib.rs` or `mod.rs` that declares and re-exports its children) is transparent:
//!   `use crate::Device` in `stream.rs` is an edge to `device`, not to the crate root. A
//!   module that defines items (or has a private `use`) is a real module: its children naming
//!   those items depend on it, and if it also uses a child's items, that is a cycle.
//! - A *cycle* is a set of two or more modules that reach each other through these edges (a
//!   strongly connected component). Each is reported with one cycle through it and, for each
//!   edge, the first line that makes it.
//!
//! Limits (a text scan, not a compiler): a name that a module both re-exports with `pub use`
//! and uses itself counts only through its other references; macros' expansions are not seen;
//! names brought in by a glob `use` count as an edge to the glob's module.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// Tokens

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    /// `::`
    Path,
    Punct(char),
}

/// Tokens with their line numbers; comments dropped, string and char literals reduced to one
/// token (strings keep their text, for `#[path = ".."]`).
fn tokenize(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == 'r'
            && (at(i + 1) == '"' || (at(i + 1) == '#' && matches!(at(i + 2), '"' | '#')))
            || (ch == 'b' && at(i + 1) == 'r' && matches!(at(i + 2), '"' | '#'))
        {
            // Raw (byte) string: r#"..."#.
            i += if ch == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while at(i) == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1; // the quote
            let start = i;
            loop {
                if i >= c.len() {
                    break;
                }
                if c[i] == '"' && (0..hashes).all(|k| at(i + 1 + k) == '#') {
                    break;
                }
                if c[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            out.push((Tok::Str(c[start..i.min(c.len())].iter().collect()), line));
            i += 1 + hashes;
        } else if ch == '"' || (ch == 'b' && at(i + 1) == '"') {
            i += if ch == 'b' { 2 } else { 1 };
            let mut s = String::new();
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    s.push(at(i + 1));
                    i += 2;
                    continue;
                }
                if c[i] == '\n' {
                    line += 1;
                }
                s.push(c[i]);
                i += 1;
            }
            out.push((Tok::Str(s), line));
            i += 1;
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            let q = if ch == 'b' { i + 1 } else { i };
            if at(q + 1) == '\\' {
                // Char literal with an escape: past the escaped char, up to the closing quote.
                i = q + 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push((Tok::Str(String::new()), line));
            } else if at(q + 2) == '\'' {
                i = q + 3;
                out.push((Tok::Str(String::new()), line));
            } else {
                // A lifetime: the identifier follows.
                i = q + 1;
                out.push((Tok::Punct('\''), line));
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let mut word: String = c[start..i].iter().collect();
            if let Some(w) = word.strip_prefix("r#") {
                word = w.to_string();
            }
            out.push((Tok::Ident(word), line));
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || c[i] == '.') {
                if c[i] == '.' && !at(i + 1).is_ascii_digit() {
                    break;
                }
                i += 1;
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// One file

/// A `use` leaf: the path as written, the name it binds (`None` for a glob or `as _`).
#[derive(Clone, Debug)]
struct UseItem {
    path: Vec<String>,
    bind: Option<String>,
    glob: bool,
    public: bool,
    line: usize,
    /// Inline modules around the `use` (for `self` / `super`).
    inline: usize,
}

/// A qualified path in code (`a::b::c`, first segment a local name, `crate`, `self`, `super`).
#[derive(Clone, Debug)]
struct PathRef {
    path: Vec<String>,
    line: usize,
    inline: usize,
}

#[derive(Debug, Default)]
struct FileInfo {
    /// `mod name;` declarations outside inline modules, with their `#[path]`.
    mods: Vec<(String, Option<String>)>,
    /// Names defined at the file's top level (items and inline modules).
    defs: BTreeSet<String>,
    uses: Vec<UseItem>,
    paths: Vec<PathRef>,
}

fn ident(t: Option<&(Tok, usize)>) -> Option<&str> {
    match t {
        Some((Tok::Ident(s), _)) => Some(s),
        _ => None,
    }
}

/// Parse a use tree starting at `toks[i]`; leaves go to `out`. Returns the index after it.
fn use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>, bool)>,
) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Path) => i += 1,
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                i += 1;
                if toks.get(i).map(|t| &t.0) == Some(&Tok::Path) {
                    path.push(s);
                    i += 1;
                    continue;
                }
                // A leaf, maybe renamed.
                let mut bind = if s == "self" {
                    path.last().cloned()
                } else {
                    Some(s.clone())
                };
                if s != "self" {
                    path.push(s);
                }
                if ident(toks.get(i)) == Some("as") {
                    bind = ident(toks.get(i + 1))
                        .filter(|b| *b != "_")
                        .map(str::to_string);
                    i += 2;
                }
                out.push((path, bind, false));
                return i;
            }
            Some(Tok::Punct('*')) => {
                out.push((path, None, true));
                return i + 1;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        Some(Tok::Punct('}')) => return i + 1,
                        Some(Tok::Punct(',')) => i += 1,
                        None => return i,
                        _ => i = use_tree(toks, i, &path, out),
                    }
                }
            }
            _ => return i,
        }
    }
}

const ITEM_KEYWORDS: [&str; 8] = [
    "struct", "enum", "union", "trait", "type", "fn", "static", "mod",
];

fn scan_file(src: &str) -> FileInfo {
    let toks = tokenize(src);
    let mut info = FileInfo::default();
    let mut depth = 0usize;
    // Brace depths at which inline modules opened.
    let mut inline: Vec<usize> = Vec::new();
    let mut pending_inline = false;
    let mut pending_path: Option<String> = None;
    let mut public = false;
    let mut i = 0;
    while i < toks.len() {
        let (tok, line) = (&toks[i].0, toks[i].1);
        match tok {
            Tok::Punct('{') => {
                depth += 1;
                if pending_inline {
                    inline.push(depth);
                    pending_inline = false;
                }
                i += 1;
            }
            Tok::Punct('}') => {
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Punct('#') if matches!(toks.get(i + 1).map(|t| &t.0), Some(Tok::Punct('['))) => {
                if ident(toks.get(i + 2)) == Some("path") {
                    if let Some((Tok::Str(p), _)) = toks.get(i + 4) {
                        pending_path = Some(p.clone());
                    }
                }
                // Skip the attribute.
                let mut d = 0;
                i += 1;
                while i < toks.len() {
                    match toks[i].0 {
                        Tok::Punct('[') => d += 1,
                        Tok::Punct(']') => {
                            d -= 1;
                            if d == 0 {
                                i += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            Tok::Ident(w) if w == "pub" => {
                public = true;
                i += 1;
                if matches!(toks.get(i).map(|t| &t.0), Some(Tok::Punct('('))) {
                    while i < toks.len() && toks[i].0 != Tok::Punct(')') {
                        i += 1;
                    }
                    i += 1;
                }
                continue;
            }
            Tok::Ident(w) if w == "use" => {
                let mut leaves = Vec::new();
                i = use_tree(&toks, i + 1, &[], &mut leaves);
                for (path, bind, glob) in leaves {
                    info.uses.push(UseItem {
                        path,
                        bind,
                        glob,
                        public,
                        line,
                        inline: inline.len(),
                    });
                }
            }
            Tok::Ident(w) if w == "macro_rules" => {
                if let Some(name) = ident(toks.get(i + 2)) {
                    if inline.is_empty() && depth == 0 {
                        info.defs.insert(name.to_string());
                    }
                }
                i += 3;
            }
            // (`'static` is a lifetime, not an item.)
            Tok::Ident(w)
                if (ITEM_KEYWORDS.contains(&w.as_str()) || w == "const")
                    && !(i > 0 && toks[i - 1].0 == Tok::Punct('\'')) =>
            {
                let name = ident(toks.get(i + 1)).map(str::to_string);
                let after = toks.get(i + 2).map(|t| &t.0);
                if w == "mod" {
                    if let Some(name) = &name {
                        if after == Some(&Tok::Punct(';')) {
                            if inline.is_empty() {
                                info.mods.push((name.clone(), pending_path.take()));
                            }
                        } else if after == Some(&Tok::Punct('{')) {
                            pending_inline = true;
                        }
                    }
                }
                if let Some(name) = name {
                    let is_item =
                        !(w == "const" && (name == "fn" || name == "unsafe" || name == "_"));
                    if is_item && inline.is_empty() && depth == 0 {
                        info.defs.insert(name);
                    }
                }
                i += 2;
            }
            Tok::Ident(first) => {
                let preceded = i > 0
                    && matches!(
                        toks[i - 1].0,
                        Tok::Path | Tok::Punct('$') | Tok::Punct('.') | Tok::Punct('\'')
                    );
                if !preceded && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Path) {
                    let mut path = vec![first.clone()];
                    let mut j = i + 1;
                    while toks.get(j).map(|t| &t.0) == Some(&Tok::Path) {
                        match ident(toks.get(j + 1)) {
                            Some(s) => path.push(s.to_string()),
                            None => break,
                        }
                        j += 2;
                    }
                    if path.len() > 1 {
                        info.paths.push(PathRef {
                            path,
                            line,
                            inline: inline.len(),
                        });
                    }
                    i = j;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
        public = false;
    }
    info
}

// ---------------------------------------------------------------------------------------------
// One crate

struct Module {
    /// `crate::a::b` as `["a", "b"]`.
    path: Vec<String>,
    file: PathBuf,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    info: FileInfo,
}

struct Crate {
    name: String,
    modules: Vec<Module>,
}

fn module_name(m: &Module) -> String {
    if m.path.is_empty() {
        "crate".to_string()
    } else {
        m.path.join("::")
    }
}

fn load_crate(name: String, root: &Path) -> Crate {
    let mut modules = Vec::new();
    let mut stack = vec![(root.to_path_buf(), Vec::<String>::new(), None::<usize>)];
    while let Some((file, path, parent)) = stack.pop() {
        let Ok(src) = std::fs::read_to_string(&file) else {
            continue;
        };
        let info = scan_file(&src);
        let idx = modules.len();
        if let Some(p) = parent {
            let m: &mut Module = &mut modules[p];
            m.children
                .insert(path.last().cloned().unwrap_or_default(), idx);
        }
        let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let own_dir = if file == root || stem == "mod" {
            dir.clone()
        } else {
            dir.join(stem)
        };
        for (child, attr) in &info.mods {
            let candidates = match attr {
                Some(p) => vec![dir.join(p)],
                None => vec![
                    own_dir.join(format!("{child}.rs")),
                    own_dir.join(child).join("mod.rs"),
                ],
            };
            if let Some(f) = candidates.into_iter().find(|f| f.is_file()) {
                let mut p = path.clone();
                p.push(child.clone());
                stack.push((f, p, Some(idx)));
            }
        }
        modules.push(Module {
            path,
            file,
            parent,
            children: BTreeMap::new(),
            info,
        });
    }
    Crate { name, modules }
}

impl Crate {
    /// Whether module `m` has a name `n` of its own (child, definition or `use` binding).
    fn has(&self, m: usize, n: &str) -> bool {
        let md = &self.modules[m];
        md.children.contains_key(n)
            || md.info.defs.contains(n)
            || md.info.uses.iter().any(|u| u.bind.as_deref() == Some(n))
    }

    /// The module that `path`, written in module `m` inside `inline` inline modules, names (the
    /// module defining the item it ends at), or `None` for paths outside the crate.
    fn resolve(&self, m: usize, inline: usize, path: &[String], depth: usize) -> Option<usize> {
        if depth > 24 || path.is_empty() {
            return None;
        }
        let (mut cur, mut i) = (m, 0);
        match path[0].as_str() {
            "crate" => {
                cur = 0;
                i = 1;
            }
            "self" => i = 1,
            "super" => {
                let mut inline = inline;
                while path.get(i).map(String::as_str) == Some("super") {
                    if inline > 0 {
                        inline -= 1;
                    } else {
                        cur = self.modules[cur].parent?;
                    }
                    i += 1;
                }
            }
            first => {
                // A name of this module (or, in an inline module, of the file: approximate).
                if !self.has(cur, first) {
                    return None;
                }
            }
        }
        while i < path.len() {
            let seg = path[i].as_str();
            let md = &self.modules[cur];
            if let Some(&c) = md.children.get(seg) {
                cur = c;
                i += 1;
                continue;
            }
            if md.info.defs.contains(seg) {
                return Some(cur);
            }
            // Follow a `use` that binds the name here (a re-export or an import).
            if let Some(u) = md.info.uses.iter().find(|u| u.bind.as_deref() == Some(seg)) {
                let mut p = u.path.clone();
                p.extend_from_slice(&path[i + 1..]);
                return self
                    .resolve(cur, u.inline, &p, depth + 1)
                    .or(Some(cur).filter(|_| self.is_local(cur, &u.path)));
            }
            // A name from a glob `use` of a crate module.
            for u in md.info.uses.iter().filter(|u| u.glob) {
                if let Some(g) = self.resolve(cur, u.inline, &u.path, depth + 1) {
                    if g != cur && self.has(g, seg) {
                        let mut p = vec!["crate".to_string()];
                        p.extend(self.modules[g].path.iter().cloned());
                        p.extend_from_slice(&path[i..]);
                        return self.resolve(0, 0, &p, depth + 1);
                    }
                }
            }
            return Some(cur);
        }
        Some(cur)
    }

    fn is_local(&self, m: usize, path: &[String]) -> bool {
        matches!(
            path.first().map(String::as_str),
            Some("crate" | "self" | "super")
        ) || path
            .first()
            .is_some_and(|f| self.modules[m].children.contains_key(f))
    }

    /// Edges `from -> to` with the first line (file:line and path) that makes each.
    fn edges(&self) -> BTreeMap<(usize, usize), String> {
        let mut edges = BTreeMap::new();
        for (a, m) in self.modules.iter().enumerate() {
            let mut add = |b: Option<usize>, line: usize, what: &[String]| {
                if let Some(b) = b.filter(|&b| b != a) {
                    edges.entry((a, b)).or_insert_with(|| {
                        format!("{}:{line}: {}", m.file.display(), what.join("::"))
                    });
                }
            };
            for u in m.info.uses.iter().filter(|u| !u.public) {
                add(self.resolve(a, u.inline, &u.path, 0), u.line, &u.path);
            }
            for p in &m.info.paths {
                add(self.resolve(a, p.inline, &p.path, 0), p.line, &p.path);
            }
        }
        edges
    }
}

/// Strongly connected components of two or more modules (Tarjan).
fn cycles(n: usize, edges: &BTreeMap<(usize, usize), String>) -> Vec<Vec<usize>> {
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges.keys() {
        adj[a].push(b);
    }
    struct T<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for k in 0..t.adj[v].len() {
            let w = t.adj[v][k];
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        adj: &adj,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    t.out
}

/// One cycle through `comp`, starting at its first module (breadth-first back to it).
fn one_cycle(comp: &[usize], edges: &BTreeMap<(usize, usize), String>) -> Vec<usize> {
    let start = comp[0];
    let inside: BTreeSet<usize> = comp.iter().copied().collect();
    let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &(a, b) in edges.keys().filter(|(a, _)| *a == v) {
            if !inside.contains(&b) {
                continue;
            }
            if b == start {
                let mut path = vec![a];
                let mut x = a;
                while x != start {
                    x = prev[&x];
                    path.push(x);
                }
                path.reverse();
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = prev.entry(b) {
                e.insert(a);
                queue.push_back(b);
            }
        }
    }
    comp.to_vec()
}

/// The report of every cycle of `krate` (empty when there is none).
fn report(krate: &Crate) -> String {
    let edges = krate.edges();
    let mut out = String::new();
    for comp in cycles(krate.modules.len(), &edges) {
        let mut names: Vec<String> = comp
            .iter()
            .map(|&m| module_name(&krate.modules[m]))
            .collect();
        names.sort();
        let _ = writeln!(out, "{}: cycle among {{{}}}:", krate.name, names.join(", "));
        let cyc = one_cycle(&comp, &edges);
        for k in 0..cyc.len() {
            let (a, b) = (cyc[k], cyc[(k + 1) % cyc.len()]);
            let why = edges.get(&(a, b)).map(String::as_str).unwrap_or("?");
            let _ = writeln!(
                out,
                "    {} -> {}   ({why})",
                module_name(&krate.modules[a]),
                module_name(&krate.modules[b])
            );
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The workspace

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The crate roots of the workspace members: (name, root file).
fn crate_roots(root: &Path) -> Vec<(String, PathBuf)> {
    let manifest =
        std::fs::read_to_string(root.join("Cargo.toml")).expect("read the workspace Cargo.toml");
    let start = manifest.find("members").expect("workspace members");
    let list = &manifest[start..];
    let list =
        &list[list.find('[').expect("members list")..=list.find(']').expect("members list end")];
    let mut roots = Vec::new();
    for member in list.split('"').skip(1).step_by(2) {
        let src = root.join(member).join("src");
        for f in ["lib.rs", "main.rs"] {
            if src.join(f).is_file() {
                roots.push((format!("{member} ({f})"), src.join(f)));
            }
        }
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            for b in bins.flatten().map(|e| e.path()) {
                if b.extension().is_some_and(|e| e == "rs") {
                    roots.push((format!("{member} (bin {})", b.display()), b));
                }
            }
        }
    }
    roots
}

#[test]
fn no_module_cycles_in_any_workspace_crate() {
    let root = workspace_root();
    let roots = crate_roots(&root);
    assert!(
        roots.len() >= 5,
        "found only {roots:?} from the workspace members"
    );
    let mut all = String::new();
    let mut modules = 0;
    for (name, file) in roots {
        let krate = load_crate(name, &file);
        assert!(!krate.modules.is_empty(), "cannot read {}", file.display());
        // FLYDSL_MODULE_GRAPH=<crate dir> prints that crate's edges.
        if std::env::var("FLYDSL_MODULE_GRAPH")
            .is_ok_and(|c| krate.name.starts_with(&format!("{c} ")))
        {
            for ((a, b), why) in krate.edges() {
                let (a, b) = (
                    module_name(&krate.modules[a]),
                    module_name(&krate.modules[b]),
                );
                println!("{a} -> {b}   ({why})");
            }
        }
        modules += krate.modules.len();
        all.push_str(&report(&krate));
    }
    println!("scanned {modules} modules");
    assert!(
        all.is_empty(),
        "module import cycles (see the rule in this test's docs):\n{all}"
    );
}

/// The rules on a small made-up crate: a facade that re-exports is transparent, `mod` is no
/// edge, `super::` to a parent's own item is an edge, and a cycle is found.
#[test]
fn the_rules_on_a_made_up_crate() {
    let dir = std::env::temp_dir().join(format!("flydsl-module-cycles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = [
        (
            "lib.rs",
            "mod a;\nmod b;\nmod facade;\npub use a::A;\npub use facade::F;\n",
        ),
        // `a` uses `b` through the crate root's re-export... of nothing: directly.
        (
            "a.rs",
            "use crate::b::B;\n/// crate::b::ignored in a comment\npub struct A;\n",
        ),
        // `b` names `A` through the root facade: an edge to `a` (a cycle a <-> b).
        (
            "b.rs",
            "pub struct B;\nfn f() -> crate::A { let _s = \"crate::nothing\"; crate::A }\n",
        ),
        // A facade whose child uses a sibling through it: no cycle.
        (
            "facade/mod.rs",
            "mod leaf;\nmod user;\npub use leaf::L;\npub use user::F;\n",
        ),
        (
            "facade/leaf.rs",
            "pub struct L;\n#[cfg(test)]\nmod tests { use super::*; }\n",
        ),
        ("facade/user.rs", "use super::L;\npub struct F(L);\n"),
    ];
    for (f, text) in files {
        let p = dir.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let krate = load_crate("demo".into(), &dir.join("lib.rs"));
    let names: BTreeSet<String> = krate.modules.iter().map(module_name).collect();
    let expect: BTreeSet<String> = ["crate", "a", "b", "facade", "facade::leaf", "facade::user"]
        .map(String::from)
        .into();
    assert_eq!(names, expect);
    let edges = krate.edges();
    let named: BTreeSet<(String, String)> = edges
        .keys()
        .map(|&(a, b)| {
            (
                module_name(&krate.modules[a]),
                module_name(&krate.modules[b]),
            )
        })
        .collect();
    let expect: BTreeSet<(String, String)> =
        [("a", "b"), ("b", "a"), ("facade::user", "facade::leaf")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .into();
    assert_eq!(named, expect, "{edges:?}");
    let r = report(&krate);
    assert!(r.contains("cycle among {a, b}"), "{r}");
    assert_eq!(r.matches("cycle among").count(), 1, "{r}");
    std::fs::remove_dir_all(&dir).unwrap();
}
