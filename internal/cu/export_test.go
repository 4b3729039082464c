package cu

// CallError and SymbolErrorOf expose the error constructors to the
// external tests.
var (
	CallError     = callError
	SymbolErrorOf = symbolError
)
