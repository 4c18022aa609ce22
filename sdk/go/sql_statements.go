package workhorse

import (
	"regexp"
	"strings"
)

// splitStatements splits a SQL script into its statements, for the migration steps that run
// statement by statement outside a transaction (PostgreSQL runs a multi-statement query in one
// implicit transaction, where CREATE INDEX CONCURRENTLY is refused). A semicolon ends a
// statement unless it is inside a quoted string or identifier, a dollar-quoted body or a
// comment; a part that holds only comments and white space is no statement.
func splitStatements(script string) []string {
	var statements []string
	start, meaningful := 0, false
	for i := 0; i < len(script); {
		c := script[i]
		switch {
		case strings.HasPrefix(script[i:], "--"):
			if end := strings.IndexByte(script[i:], '\n'); end >= 0 {
				i += end + 1
			} else {
				i = len(script)
			}
			continue
		case strings.HasPrefix(script[i:], "/*"):
			i = blockCommentEnd(script, i)
			continue
		case c == ';':
			if meaningful {
				statements = append(statements, strings.TrimSpace(script[start:i]))
			}
			start, meaningful = i+1, false
			i++
			continue
		}
		if !isSpace(c) {
			meaningful = true
		}
		switch {
		case c == '\'' || c == '"':
			escapes := c == '\'' && i > 0 && (script[i-1] == 'e' || script[i-1] == 'E') && (i < 2 || !isWordByte(script[i-2]))
			i = quotedEnd(script, i, c, escapes)
			continue
		case c == '$' && (i == 0 || !isWordByte(script[i-1])):
			if tag := dollarTag.FindString(script[i:]); tag != "" {
				if end := strings.Index(script[i+len(tag):], tag); end >= 0 {
					i += len(tag) + end + len(tag)
				} else {
					i = len(script)
				}
				continue
			}
		}
		i++
	}
	if meaningful {
		statements = append(statements, strings.TrimSpace(script[start:]))
	}
	return statements
}

var dollarTag = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)?\$`)

// blockCommentEnd is the index after the comment opened at i (PostgreSQL's block comments nest).
func blockCommentEnd(script string, i int) int {
	depth := 0
	for i < len(script) {
		switch {
		case strings.HasPrefix(script[i:], "/*"):
			depth++
			i += 2
		case strings.HasPrefix(script[i:], "*/"):
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return i
}

// quotedEnd is the index after the string or identifier opened at i by quote.
func quotedEnd(script string, i int, quote byte, escapes bool) int {
	for i++; i < len(script); i++ {
		switch {
		case escapes && script[i] == '\\':
			i++
		case script[i] == quote:
			if i+1 < len(script) && script[i+1] == quote {
				i++
				continue
			}
			return i + 1
		}
	}
	return i
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
