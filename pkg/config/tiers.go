package config

import (
	"slices"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// decodeTiers reads every [tiers.NAME] table, sorted by name.
func decodeTiers(rt *table) []Tier {
	tt, ok := rt.sub("tiers")
	if !ok {
		return nil
	}
	names := make([]string, 0, len(tt.m))
	for name := range tt.m {
		names = append(names, name)
	}
	slices.Sort(names)
	var tiers []Tier
	for _, name := range names {
		t, ok := tt.sub(name)
		if !ok {
			continue
		}
		if !ValidName(name) {
			tt.errf(name, "tier name %q is not valid: use %s", name, NameRule)
		}
		tiers = append(tiers, decodeTier(t, name))
	}
	return tiers
}

// rateCeil reads a rate key and its ceil key: the ceil defaults to the
// rate and must not be below it. Callers report a ceil without its rate
// where that is an error.
func rateCeil(t *table, rateKey, ceilKey string) (rate, ceil tbf.Rate, rateSet, ceilSet bool) {
	rate, rateSet = t.rate(rateKey)
	ceil, ceilSet = t.rate(ceilKey)
	if ceilSet && rateSet && ceil < rate {
		t.errf(ceilKey, "%s is below %s %s", ceil, rateKey, rate)
	}
	if !ceilSet {
		ceil = rate
	}
	return rate, ceil, rateSet, ceilSet
}

// decodeTier reads one tier table.
func decodeTier(t *table, name string) Tier {
	tier := Tier{Name: name, QuotaPeriod: PeriodMonth, Source: t.f.where(t.path)}
	t.require("rate")
	tier.Rate, tier.Ceil, _, _ = rateCeil(t, "rate", "ceil")

	var upRateSet, upCeilSet bool
	tier.UploadRate, tier.UploadCeil, upRateSet, upCeilSet = uploadRates(t, tier.Rate, tier.Ceil)

	tier.Burst, _ = t.size("burst")
	tier.CBurst, _ = t.size("cburst")
	if n, ok := t.integer("prio", 0, 7); ok {
		tier.Prio = uint32(n)
	}

	var aggSet, aggCeilSet bool
	tier.AggregateRate, tier.AggregateCeil, aggSet, aggCeilSet = rateCeil(t, "aggregate_rate", "aggregate_ceil")
	if aggCeilSet && !aggSet {
		t.errf("aggregate_ceil", "needs aggregate_rate")
	}
	upAgg, upAggCeil, upAggSet, upAggCeilSet := rateCeil(t, "upload_aggregate_rate", "upload_aggregate_ceil")
	switch {
	case upAggCeilSet && !upAggSet:
		t.errf("upload_aggregate_ceil", "needs upload_aggregate_rate")
	case upAggSet:
		tier.AggregateUploadRate, tier.AggregateUploadCeil = upAgg, upAggCeil
	default:
		tier.AggregateUploadRate, tier.AggregateUploadCeil = tier.AggregateRate, tier.AggregateCeil
	}

	if scheds, ok := t.tables("schedule"); ok {
		for _, st := range scheds {
			if s, ok := decodeSchedule(st, &tier, upRateSet, upCeilSet); ok {
				tier.Schedules = append(tier.Schedules, s)
			}
		}
	}
	decodeQuota(t, &tier)
	tier.Leaf, tier.QueueLatency = decodeLeaf(t)
	if list, ok := t.strs("interfaces"); ok {
		if len(list) == 0 {
			t.errf("interfaces", "no interfaces given (leave the key out for every interface)")
		}
		for _, e := range list {
			tier.Interfaces = append(tier.Interfaces, e.s)
			tier.ifaceKeys = append(tier.ifaceKeys, index(t.key("interfaces"), e.i))
		}
	}
	t.finish()
	return tier
}

// decodeQuota reads quota, quota_period, over_quota_rate and over_quota_ceil.
func decodeQuota(t *table, tier *Tier) {
	q, qSet := t.size("quota")
	if qSet && q == 0 {
		t.errf("quota", "quota is 0 (leave the key out for no quota)")
	}
	if p, ok := t.enum("quota_period", string(PeriodDay), string(PeriodWeek), string(PeriodMonth)); ok {
		tier.QuotaPeriod = Period(p)
	}
	var rateSet bool
	tier.OverQuotaRate, tier.OverQuotaCeil, rateSet, _ = rateCeil(t, "over_quota_rate", "over_quota_ceil")
	if !qSet {
		for _, k := range []string{"quota_period", "over_quota_rate", "over_quota_ceil"} {
			if t.has(k) {
				t.errf(k, "is only used with quota")
			}
		}
		tier.OverQuotaRate, tier.OverQuotaCeil = 0, 0
		return
	}
	tier.Quota = q
	if !rateSet && !t.has("over_quota_rate") {
		t.errf("quota", "needs over_quota_rate (the rate beyond the quota)")
	}
}

// uploadRates reads upload_rate and upload_ceil of a tier or node whose
// download rates are rate and ceil: upload_rate defaults to rate,
// upload_ceil to the larger of ceil and upload_rate, and must not be
// below upload_rate.
func uploadRates(t *table, rate, ceil tbf.Rate) (upRate, upCeil tbf.Rate, rateSet, ceilSet bool) {
	upRate, rateSet = t.rate("upload_rate")
	if !rateSet {
		upRate = rate
	}
	upCeil, ceilSet = t.rate("upload_ceil")
	if !ceilSet {
		upCeil = max(ceil, upRate)
	} else if upCeil < upRate && upRate != 0 {
		t.errf("upload_ceil", "%s is below upload_rate %s", upCeil, upRate)
	}
	return upRate, upCeil, rateSet, ceilSet
}
