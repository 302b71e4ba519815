package config

import "strings"

// decodeSchedule reads one [[tiers.NAME.schedule]] entry and resolves its
// values against the tier (see Schedule). upRateSet/upCeilSet say whether
// the tier set upload_rate/upload_ceil itself.
func decodeSchedule(t *table, tier *Tier, upRateSet, upCeilSet bool) (Schedule, bool) {
	var s Schedule
	ok := t.require("days", "from", "to")
	if days, present := t.strs("days"); present {
		if len(days) == 0 {
			t.errf("days", "no days given (use mon, tue, wed, thu, fri, sat, sun, weekdays, weekend or all)")
			ok = false
		}
		for _, d := range days {
			w, known := dayWords[strings.ToLower(d.s)]
			if !known {
				t.f.errf(index(t.key("days"), d.i), "%q is not a day (use mon, tue, wed, thu, fri, sat, sun, weekdays, weekend or all)", d.s)
				ok = false
			}
			s.Days |= w
		}
	}
	from, fromOK := scheduleTime(t, "from")
	to, toOK := scheduleTime(t, "to")
	s.From, s.To = from, to
	switch {
	case fromOK && from == 24*60:
		t.errf("from", "from must be before 24:00")
		ok = false
	case fromOK && toOK && from == to:
		t.errf("to", "the window is empty: from and to are both %s", from)
		ok = false
	case !fromOK || !toOK:
		ok = false
	}

	rate, rateSet := t.rate("rate")
	ceil, ceilSet := t.rate("ceil")
	upRate, sUpRateSet := t.rate("upload_rate")
	upCeil, sUpCeilSet := t.rate("upload_ceil")
	if !t.has("rate") && !t.has("ceil") && !t.has("upload_rate") && !t.has("upload_ceil") {
		t.f.errf(t.path, "schedule sets none of rate, ceil, upload_rate, upload_ceil")
		ok = false
	}
	t.finish()

	// Download.
	s.Rate, s.Ceil = tier.Rate, tier.Ceil
	if rateSet {
		s.Rate = rate
		s.Ceil = max(rate, tier.Ceil)
	}
	if ceilSet {
		s.Ceil = ceil
		if ceil < s.Rate {
			if rateSet {
				t.errf("ceil", "%s is below rate %s", ceil, s.Rate)
			} else {
				t.errf("ceil", "%s is below the tier's rate %s (set rate in the schedule too)", ceil, s.Rate)
			}
			ok = false
		}
	}
	// Upload: follows the scheduled download values unless the tier sets
	// its own upload values.
	s.UploadRate = s.Rate
	if upRateSet {
		s.UploadRate = tier.UploadRate
	}
	s.UploadCeil = max(s.Ceil, s.UploadRate)
	if upCeilSet {
		s.UploadCeil = max(tier.UploadCeil, s.UploadRate)
	}
	if sUpRateSet {
		s.UploadRate = upRate
		s.UploadCeil = max(s.UploadCeil, upRate)
	}
	if sUpCeilSet {
		s.UploadCeil = upCeil
		if upCeil < s.UploadRate {
			t.errf("upload_ceil", "%s is below upload rate %s", upCeil, s.UploadRate)
			ok = false
		}
	}
	return s, ok
}

// scheduleTime reads the HH:MM time at k.
func scheduleTime(t *table, k string) (TimeOfDay, bool) {
	v, ok := t.str(k)
	if !ok {
		return 0, false
	}
	tod, err := parseTimeOfDay(v)
	if err != nil {
		t.errf(k, "%v", err)
		return 0, false
	}
	return tod, true
}
