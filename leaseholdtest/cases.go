package leaseholdtest

// managerCases check the semantics matrix through Managers on the backend.
func (s *suite) managerCases() []testCase {
	return []testCase{
		{"BusyIsErrNotAcquiredWithoutErrorLog", s.mBusy},
		{"WaitRunsOut", s.mWaitTimeout},
		{"WaitForeverUntilContextEnds", s.mWaitForever},
		{"WaiterGetsLeaseOnRelease", s.mHandOff},
		{"WaiterGetsLeaseOnHolderExpiry", s.mHandOffOnExpiry},
		{"InvalidNamesRejectedBeforeBackend", s.mInvalidNames},
		{"InvalidOptionsRejectedBeforeBackend", s.mInvalidOptions},
		{"ExpiryWithoutRenewalIsLoss", s.mExpiry},
		{"UnconfirmedRenewalIsLossByLocalDeadline", s.mRenewImpossible},
		{"RejectedRenewalIsLoss", s.mRejected},
		{"RenewOnReleasedHandle", s.mRenewReleased},
		{"RenewWithCancelledContext", s.mRenewCancelled},
		{"ExplicitRenewKeepsTokenExtendsExpiry", s.mExplicitRenew},
		{"ReleaseIsIdempotent", s.mDoubleRelease},
		{"FencingTokensIncrease", s.mFencing},
		{"NoReentryAndFIFOWaiters", s.mNoReentry},
		{"DifferentNamesNeverBlock", s.mIndependentNames},
		{"TwoOwnersContend", s.mTwoOwners},
		{"StaleOwnerCannotTouchNewHolding", s.mStaleOwner},
		{"AutoRenewOutlivesSeveralTTLs", s.mAutoRenew},
		{"AbandonedGrantIsReleased", s.mAbandonedGrant},
		{"AmbiguousAcquireIsReleased", s.mAmbiguousAcquire},
		{"BackendFaultIsNotErrNotAcquired", s.mBackendFault},
		{"DoRunsAndReleases", s.mDo},
		{"DoReportsLoss", s.mDoLost},
		{"HeldAndMetadata", s.mHeld},
		{"InspectSeesAnyOwner", s.mInspect},
		{"RevokedLeaseIsLostAsRejected", s.mRevoked},
		{"CloseReleasesEverything", s.mClose},
		{"BatchedRenewalsMixedResults", s.mBatchMixed},
		{"BatchFailureFailsClosedPerLease", s.mBatchFailure},
		{"NoRenewalStarvesWhenBatchesAreFull", s.mBatchStarvation},
	}
}
