package manpage

import (
	"regexp"
	"strings"
)

var (
	// tableLine is a TOML table header: "[daemon]", "[[interface]]".
	tableLine = regexp.MustCompile(`^\[\[?[a-z0-9_.-]+\]\]?$`)
	// keyLine is a "key = value" line (possibly commented out).
	keyLine = regexp.MustCompile(`^[a-z_]+ = `)
)

// Config turns a commented example configuration into roff. The comment
// block at its top becomes the description (in the help layout of Text);
// the rest becomes the reference:
//   - a table header ("[daemon]") starts a subsection;
//   - the comment before one or more keys describes those keys: a tagged
//     paragraph per group, tagged with each key and its example value;
//   - keys without a comment before them, and commented-out examples that
//     follow a paragraph, are kept as written;
//   - indented comment lines (tables of values) are kept as written
//     inside their paragraph; other comment lines are prose.
func Config(text string) (description, reference string) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	i := 0
	var head []string
	for ; i < len(lines) && strings.HasPrefix(lines[i], "#"); i++ {
		head = append(head, uncomment(lines[i]))
	}
	description = Text(strings.Join(head, "\n"))

	c := &configWriter{}
	for ; i < len(lines); i++ {
		raw := strings.TrimRight(lines[i], " \t")
		comment := strings.HasPrefix(raw, "#")
		text := raw
		if comment {
			text = uncomment(raw)
		}
		switch {
		case raw == "":
			c.flushProse()
			c.flushBlock()
		case !comment && tableLine.MatchString(text):
			c.flushProse()
			c.flushBlock()
			c.b.WriteString(".SS " + quote(text) + "\n")
		case comment && tableLine.MatchString(text):
			// A commented-out table starts an example.
			c.flushProse()
			c.block = append(c.block, text)
		case keyLine.MatchString(text):
			if len(c.prose) == 0 {
				c.block = append(c.block, text)
			} else {
				c.keys = append(c.keys, text)
			}
		default:
			if len(c.keys) > 0 {
				c.flushKeys()
			}
			if len(c.block) > 0 && len(c.prose) == 0 && comment && !isIndented(text) {
				// Prose after an example: the example is over.
				c.flushBlock()
			}
			c.prose = append(c.prose, proseLine{text, isIndented(text)})
		}
	}
	c.flushProse()
	c.flushBlock()
	return description, c.b.String()
}

type proseLine struct {
	text     string
	verbatim bool
}

// configWriter holds what Config has read but not yet written.
type configWriter struct {
	b     strings.Builder
	prose []proseLine // comment lines not yet written
	keys  []string    // key lines the prose describes
	block []string    // lines to keep as written
}

func (c *configWriter) flushBlock() {
	if len(c.block) == 0 {
		return
	}
	c.b.WriteString(".PP\n.RS 4\n.nf\n")
	for _, l := range c.block {
		c.b.WriteString(line(l) + "\n")
	}
	c.b.WriteString(".fi\n.RE\n")
	c.block = nil
}

// flushKeys writes the pending keys tagged with the pending prose.
func (c *configWriter) flushKeys() {
	if len(c.keys) == 0 {
		return
	}
	c.flushBlock()
	for k, key := range c.keys {
		if k == 0 {
			c.b.WriteString(".TP\n")
		} else {
			c.b.WriteString(".TQ\n")
		}
		c.b.WriteString(`\fB` + escape(key) + "\\fR\n")
	}
	c.writeProse()
	c.keys = nil
}

// flushProse writes pending keys, or else the pending prose as a paragraph.
func (c *configWriter) flushProse() {
	if len(c.keys) > 0 {
		c.flushKeys()
		return
	}
	if len(c.prose) > 0 {
		c.flushBlock()
		c.b.WriteString(".PP\n")
		c.writeProse()
	}
}

func (c *configWriter) writeProse() {
	nofill := false
	for _, p := range c.prose {
		if p.verbatim != nofill {
			if p.verbatim {
				c.b.WriteString(".nf\n")
			} else {
				c.b.WriteString(".fi\n")
			}
			nofill = p.verbatim
		}
		c.b.WriteString(line(p.text) + "\n")
	}
	if nofill {
		c.b.WriteString(".fi\n")
	}
	c.prose = nil
}

func isIndented(s string) bool { return strings.HasPrefix(s, " ") || strings.HasPrefix(s, "\t") }

// uncomment strips "#" and one space from a comment line.
func uncomment(l string) string {
	l = strings.TrimPrefix(l, "#")
	return strings.TrimPrefix(l, " ")
}
