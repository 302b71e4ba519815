package psched

import "testing"

func TestFramingCharged(t *testing.T) {
	tests := []struct {
		f    Framing
		len  int
		want int
	}{
		{Framing{}, 1514, 1514},
		{Framing{Overhead: 34}, 1514, 1548},                  // PPPoE over VDSL
		{Framing{Overhead: 100}, 1514, 1614},                 // the throughput test's overhead
		{Framing{MPU: 64}, 42, 64},                           // a runt counts as the mpu
		{Framing{Overhead: 10, MPU: 64}, 50, 64},             // mpu after overhead
		{Framing{Overhead: 10, MPU: 64}, 60, 70},             // above the mpu
		{Framing{ATM: true}, 48, 53},                         // one full cell
		{Framing{ATM: true}, 49, 106},                        // a byte into the second cell
		{Framing{ATM: true, Overhead: 10}, 1500, 32 * 53},    // 1510 B -> 32 cells
		{Framing{ATM: true, Overhead: 44, MPU: 96}, 40, 106}, // 84 -> mpu 96 -> 2 cells
		{Framing{Overhead: -4}, 1514, 1510},                  // a negative overhead (size table)
		{Framing{Overhead: -64}, 42, 1},                      // at least 1 byte
		{Framing{Overhead: -14, ATM: true}, 62, 53},          // 48 bytes: one cell
	}
	for _, tt := range tests {
		if got := tt.f.Charged(tt.len); got != tt.want {
			t.Errorf("%+v.Charged(%d) = %d, want %d", tt.f, tt.len, got, tt.want)
		}
		// The kernel's arithmetic agrees: l2t of the framing's rate config
		// equals l2t of the charged length without framing.
		plain := NewRateConfig(bps10Mbit, 0, 0)
		if got, want := tt.f.L2T(bps10Mbit, tt.len), plain.L2T(tt.want); got != want {
			t.Errorf("%+v: L2T(%d) = %d ns, want L2T(%d) = %d ns", tt.f, tt.len, got, tt.want, want)
		}
	}
}

func TestFramingGoodput(t *testing.T) {
	g := Framing{Overhead: 100}.Goodput(1514)
	if want := 1514.0 / 1614.0; g != want {
		t.Errorf("Goodput = %v, want %v", g, want)
	}
	if g := (Framing{}).Goodput(1514); g != 1 {
		t.Errorf("zero framing goodput = %v, want 1", g)
	}
	if rc := (Framing{ATM: true}).RateConfig(1000); rc.LinkLayer != LinkLayerATM {
		t.Errorf("ATM framing rate config has link layer %d", rc.LinkLayer)
	}
}

func TestFramingSplit(t *testing.T) {
	f := Framing{Overhead: -4, MPU: 64, ATM: true}
	if r := f.RateSpec(); r.Overhead != 0 || r.MPU != 64 || !r.ATM || f.SizeTableOverhead() != -4 {
		t.Errorf("negative overhead: rate spec %+v, size table %d", r, f.SizeTableOverhead())
	}
	p := Framing{Overhead: 34}
	if p.RateSpec() != p || p.SizeTableOverhead() != 0 || p.QdiscLen(100) != 100 {
		t.Errorf("positive overhead belongs to the rate spec: %+v %d", p.RateSpec(), p.SizeTableOverhead())
	}
}
