package model

// Internals the external tests (package model_test) check.
var (
	ClassMap             = classMap
	ClassParamMismatches = classParamMismatches
	CountUnique          = countUnique
	QdiscHashBucket      = qdiscHashBucket
)
