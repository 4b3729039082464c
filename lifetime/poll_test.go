package lifetime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/lifetime"
)

func TestPollWindowConstantsMatchTheServer(t *testing.T) {
	assert.Equal(t, hostfn.DefaultPollWindow, lifetime.DefaultPollWindow)
	assert.Equal(t, hostfn.MaxPollWindow, lifetime.MaxPollWindow)
}

func TestSetPollWindowClampsAndReturnsThePrevious(t *testing.T) {
	old := lifetime.SetPollWindow(-time.Second)
	defer lifetime.SetPollWindow(old)
	assert.Equal(t, time.Duration(0), lifetime.SetPollWindow(2*lifetime.MaxPollWindow))
	assert.Equal(t, lifetime.MaxPollWindow, lifetime.SetPollWindow(lifetime.DefaultPollWindow))
	assert.Equal(t, lifetime.DefaultPollWindow, lifetime.SetPollWindow(old))
}
