package manpage

import (
	"strings"
)

// Text turns a help text into roff. The help texts follow one layout:
//   - an unindented line ending in ':' ("Flags:") is a heading;
//   - indented lines (flag lists, examples, tables) are kept as written,
//     in a no-fill block;
//   - other lines are prose, filled into paragraphs; a blank line ends one.
func Text(help string) string {
	var b strings.Builder
	var prose []string
	var block []string
	flushProse := func() {
		if len(prose) > 0 {
			b.WriteString(".PP\n")
			for _, l := range prose {
				b.WriteString(line(l) + "\n")
			}
			prose = nil
		}
	}
	flushBlock := func() {
		// Trailing blank lines of a block belong to no one.
		for len(block) > 0 && block[len(block)-1] == "" {
			block = block[:len(block)-1]
		}
		if len(block) > 0 {
			b.WriteString(".PP\n.RS 4\n.nf\n")
			for _, l := range block {
				b.WriteString(line(dedent(l)) + "\n")
			}
			b.WriteString(".fi\n.RE\n")
			block = nil
		}
	}
	for _, l := range strings.Split(strings.TrimRight(help, "\n"), "\n") {
		l = strings.TrimRight(l, " \t")
		switch {
		case l == "":
			flushProse()
			if len(block) > 0 {
				block = append(block, "")
			}
		case strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t"):
			flushProse()
			block = append(block, l)
		case strings.HasSuffix(l, ":") && !strings.Contains(l, ". "):
			flushProse()
			flushBlock()
			b.WriteString(".PP\n.B " + line(l) + "\n")
		default:
			flushBlock()
			prose = append(prose, l)
		}
	}
	flushProse()
	flushBlock()
	return b.String()
}

// dedent removes the two spaces every help text indents its blocks by.
func dedent(l string) string {
	return strings.TrimPrefix(l, "  ")
}
