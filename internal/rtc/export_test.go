package rtc

// CallError exposes the error constructor to the external tests.
var CallError = callError
