package purgatory

// Forget stops holding revision rev of doc without releasing it and
// without remembering it: another process sharing the store released or
// dropped it, so there is nothing left to serve or refuse here. The
// document's hunt is told the smaller needed set, or removed with its
// last revision. Forgetting a revision the purgatory does not hold does
// nothing.
func (p *Purgatory) Forget(doc, rev string) {
	p.relMu.Lock() // revisions leave only under relMu
	defer p.relMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[doc]
	if e == nil {
		return
	}
	hr := e.find(rev)
	if hr == nil {
		return
	}
	p.dropRev(e, hr)
	p.afterDropLocked(e)
}
