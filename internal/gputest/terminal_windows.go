package gputest

// terminalPath is the console Main writes its summary to.
const terminalPath = "CONOUT$"
