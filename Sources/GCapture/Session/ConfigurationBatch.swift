/// begin/commitConfiguration's nesting, as both sessions keep it: the configuration in force, the one staged while a
/// batch is open, and how many begins are still to be committed.
struct ConfigurationBatch<Configuration> {
    var committed: Configuration
    var staged: Configuration?
    var depth = 0

    init(committed: Configuration) { self.committed = committed }

    /// What the app sees: the staged configuration while a batch is open.
    var current: Configuration { staged ?? committed }

    mutating func begin() {
        if depth == 0 { staged = committed }
        depth += 1
    }

    /// Closes one level; the staged configuration when it was the outermost (the caller applies it).
    mutating func end() -> Configuration? {
        guard depth > 0 else { return nil }
        depth -= 1
        guard depth == 0 else { return nil }
        defer { staged = nil }
        return staged
    }

    /// Changes the staged configuration, opening a batch of its own when none is open; true when it did, and the
    /// caller must then commit it at once (a change outside begin/commit applies by itself).
    mutating func change(_ body: (inout Configuration) -> Void) -> Bool {
        let implicit = depth == 0
        if implicit { begin() }
        body(&staged!)
        return implicit
    }
}
