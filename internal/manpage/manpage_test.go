package manpage

import (
	"strings"
	"testing"
)

func TestTextLayout(t *testing.T) {
	got := Text("Usage: x [--json]\n\nShow things,\nall of them.\n\nFlags:\n  --json   print JSON\n  .dot     a leading dot\n")
	want := ".PP\nUsage: x [\\-\\-json]\n.PP\nShow things,\nall of them.\n.PP\n.B Flags:\n" +
		".PP\n.RS 4\n.nf\n\\-\\-json   print JSON\n\\&.dot     a leading dot\n.fi\n.RE\n"
	if got != want {
		t.Errorf("Text:\n%s\nwant:\n%s", got, want)
	}
}

func TestConfigKeysAndExamples(t *testing.T) {
	desc, ref := Config(`# header line
#   indented table

[daemon]
# The socket.
socket = "/run/s"
# Groups.
# socket_group = "x"
# admin_group = "y"

# An example:
# [[interface]]
# name = "wan0"

[tiers.a]
rate = "1mbit"
`)
	if !strings.Contains(desc, "header line") || !strings.Contains(desc, ".nf\nindented table") {
		t.Errorf("description:\n%s", desc)
	}
	for _, w := range []string{
		`.SS "[daemon]"` + "\n.TP\n\\fBsocket = \"/run/s\"\\fR\nThe socket.\n",
		".TP\n\\fBsocket_group = \"x\"\\fR\n.TQ\n\\fBadmin_group = \"y\"\\fR\nGroups.\n",
		".PP\nAn example:\n.PP\n.RS 4\n.nf\n[[interface]]\nname = \"wan0\"\n.fi\n.RE\n",
		`.SS "[tiers.a]"` + "\n.PP\n.RS 4\n.nf\nrate = \"1mbit\"\n.fi\n.RE\n",
	} {
		if !strings.Contains(ref, w) {
			t.Errorf("reference lacks\n%s\ngot:\n%s", w, ref)
		}
	}
}

func TestRoffHeader(t *testing.T) {
	got := Page{Name: "x", Section: "8", Manual: "M", Summary: "does -things",
		Sections: []Section{{Title: "Description", Body: ".PP\nhi\n"}}}.Roff()
	for _, w := range []string{`.TH "X" 8 "" "shaperd" "M"`, ".SH NAME\nx \\- does \\-things\n", `.SH "DESCRIPTION"` + "\n.PP\nhi\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("page lacks %q:\n%s", w, got)
		}
	}
}
