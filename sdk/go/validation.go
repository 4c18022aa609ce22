package workhorse

import (
	"encoding/json"
	"math"
	"time"
	"unicode/utf8"
)

// Limits of limits.json the SDK still uses (the SQL functions enforce them too).
var (
	maxNameLength = int(limits.Enqueue.NameLength.Max)
	maxBatch      = int(limits.Enqueue.BatchSize.Max)
	maxJSONBytes  = int(limits.Enqueue.JSONBytes.Max)
	maxJSONDepth  = int(limits.Enqueue.JSONDepth.Max)
	maxTags       = int(limits.Enqueue.Tags.Max)
	maxDelayMs    = limits.RetryPolicy.DelayMs.Max
)

// maxProgressLen bounds a job's progress value (64 KiB of JSON).
const maxProgressLen = 64 << 10

// checkName: 1 to 128 characters, a letter or digit first, then letters, digits or . _ : / -
// (names are safe in logs, URLs and command lines).
func checkName(value, field string) error {
	ok := len(value) > 0 && len(value) <= maxNameLength
	for i := 0; ok && i < len(value); i++ {
		c := value[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		ok = alnum || i > 0 && (c == '.' || c == '_' || c == ':' || c == '/' || c == '-')
	}
	if !ok {
		return invalid(field, "must be 1 to 128 characters: a letter or digit, then letters, digits or . _ : / -")
	}
	return nil
}

func checkRange(value int64, field string, min, max int64) error {
	if value < min || value > max {
		return invalid(field, "must be an integer from %d to %d", min, max)
	}
	return nil
}

// wholeMs is d in milliseconds; a duration that is not a whole number of them is refused.
func wholeMs(d time.Duration, field string, min, max int64) (int64, error) {
	ms, err := millis(d, field)
	if err != nil {
		return 0, err
	}
	return ms, checkRange(ms, field, min, max)
}

// millis is d in whole milliseconds for a protocol function, which checks the range itself.
func millis(d time.Duration, field string) (int64, error) {
	if d%time.Millisecond != 0 {
		return 0, invalid(field, "must be a whole number of milliseconds")
	}
	return d.Milliseconds(), nil
}

// checkParamInt: an int for an integer parameter of a protocol function (a limit) fits the
// parameter's 32 bits; its range is the function's to check.
func checkParamInt(value int, field string) (int, error) {
	if value > math.MaxInt32 || value < math.MinInt32 {
		return 0, invalid(field, "must be an integer (this one is beyond a 32-bit integer)")
	}
	return value, nil
}

// checkText refuses strings PostgreSQL's jsonb cannot store: invalid UTF-8 and NUL.
func checkText(value, field string) error {
	if !utf8.ValidString(value) {
		return invalid(field, "is not valid UTF-8 text")
	}
	for i := 0; i < len(value); i++ {
		if value[i] == 0 {
			return invalid(field, "contains the character \\u0000, which PostgreSQL cannot store in JSON")
		}
	}
	return nil
}

// toJSON encodes a payload, result, checkpoint or progress value (json.RawMessage goes as it
// is) and checks that PostgreSQL stores it and gives it back unchanged, within limit bytes.
func toJSON(value any, field string, limit int) ([]byte, error) {
	data, err := json.Marshal(value)
	if err != nil {
		return nil, invalid(field, "is not JSON: %v", err)
	}
	if err := checkJSON(data, field, limit); err != nil {
		return nil, err
	}
	return data, nil
}

// checkJSON checks encoded JSON in one pass: at most limit bytes, valid UTF-8, nesting at most
// 100 levels, and no \u0000 or unpaired UTF-16 surrogate escape (jsonb refuses both).
func checkJSON(data []byte, field string, limit int) error {
	if len(data) > limit {
		if limit == maxJSONBytes {
			return invalid(field, "is larger than the 1 MiB limit (%d bytes of JSON)", limit)
		}
		return invalid(field, "is larger than the %d KiB limit (%d bytes of JSON)", limit/1024, limit)
	}
	if !utf8.Valid(data) {
		return invalid(field, "is not valid UTF-8 text")
	}
	depth := 0
	inString := false
	pendingHigh := false // the last escape was a high surrogate that needs its low half next
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			switch c {
			case '"':
				inString = true
			case '[', '{':
				depth++
				if depth > maxJSONDepth {
					return invalid(field, "nests deeper than %d levels", maxJSONDepth)
				}
			case ']', '}':
				depth--
			}
			continue
		}
		if c == '"' {
			if pendingHigh {
				return invalid(field, "contains an unpaired UTF-16 surrogate, which is not valid Unicode text")
			}
			inString = false
			continue
		}
		if c != '\\' {
			if pendingHigh {
				return invalid(field, "contains an unpaired UTF-16 surrogate, which is not valid Unicode text")
			}
			continue
		}
		i++
		if i >= len(data) || data[i] != 'u' {
			if pendingHigh {
				return invalid(field, "contains an unpaired UTF-16 surrogate, which is not valid Unicode text")
			}
			continue
		}
		if i+4 >= len(data) {
			return invalid(field, "is not JSON")
		}
		code := hex4(data[i+1 : i+5])
		i += 4
		switch {
		case code == 0:
			return invalid(field, "contains the character \\u0000, which PostgreSQL cannot store in JSON")
		case code >= 0xd800 && code <= 0xdbff:
			if pendingHigh {
				return invalid(field, "contains an unpaired UTF-16 surrogate, which is not valid Unicode text")
			}
			pendingHigh = true
		case code >= 0xdc00 && code <= 0xdfff:
			if !pendingHigh {
				return invalid(field, "contains an unpaired UTF-16 surrogate, which is not valid Unicode text")
			}
			pendingHigh = false
		default:
			if pendingHigh {
				return invalid(field, "contains an unpaired UTF-16 surrogate, which is not valid Unicode text")
			}
		}
	}
	return nil
}

func hex4(b []byte) int {
	n := 0
	for _, c := range b {
		n <<= 4
		switch {
		case c >= '0' && c <= '9':
			n |= int(c - '0')
		case c >= 'a' && c <= 'f':
			n |= int(c-'a') + 10
		case c >= 'A' && c <= 'F':
			n |= int(c-'A') + 10
		}
	}
	return n
}

// checkTime: a set time within the years of limits.json (1970 to 9999), as the SQL functions'
// ISO text. (PostgreSQL cannot read a year past 9999 as ISO text, so the range stays here; the
// SQL functions check it again.)
func checkTime(t time.Time, field string) (string, error) {
	if y := t.UTC().Year(); y < limits.Dates.MinYear || y > limits.Dates.MaxYear {
		return "", invalid(field, "must be a time between the years %d and %d", limits.Dates.MinYear, limits.Dates.MaxYear)
	}
	return t.UTC().Format("2006-01-02T15:04:05.999999Z"), nil
}

// checkJobID: a job id is a UUID in its text form.
func checkJobID(id, field string) error {
	ok := len(id) == 36
	for i := 0; ok && i < 36; i++ {
		c := id[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			ok = c == '-'
		} else {
			ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
		}
	}
	if !ok {
		return invalid(field, "must be a job id (a UUID string)")
	}
	return nil
}
