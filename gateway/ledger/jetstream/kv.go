package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// claimGrace is how much longer than its ttl a claim record lives in the
// claims bucket. Expiry is decided by the stored expires_at against the
// caller's clock; the bucket's per-key TTL only removes records that
// have certainly lapsed, with room for clocks that differ between relays.
const claimGrace = 5 * time.Minute

// claimRetries bounds the compare-and-set loop of Claim and ReleaseClaim.
const claimRetries = 50

// kvKey is the bucket key for (group, x): two subject tokens.
func kvKey(group, x string) string { return token(group) + "." + token(x) }

// cursorTo returns the cursor of actor in group at eventID, an event of
// group, and its KV entry's value.
func (s *Store) cursorTo(ctx context.Context, what, group, actor, eventID string) (ledger.Cursor, []byte, error) {
	if err := s.check(what); err != nil {
		return ledger.Cursor{}, nil, err
	}
	if group == "" || actor == "" || eventID == "" {
		return ledger.Cursor{}, nil, fmt.Errorf("jetstream: %s: %w: empty group, actor or event id", what, ledger.ErrInvalid)
	}
	ev, err := s.Get(ctx, eventID)
	if err == nil && ev.GroupID != group {
		err = fmt.Errorf("jetstream: event %s is in group %q: %w", eventID, ev.GroupID, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Cursor{}, nil, fmt.Errorf("jetstream: %s %q/%q: %w", what, group, actor, err)
	}
	c := ledger.Cursor{GroupID: group, Actor: actor, EventID: eventID, Seq: ev.Seq}
	b, _ := json.Marshal(c)
	return c, b, nil
}

// SetCursor implements ledger.Store: one KV entry per (group, actor), last
// write wins.
func (s *Store) SetCursor(ctx context.Context, group, actor, eventID string) (ledger.Cursor, error) {
	c, b, err := s.cursorTo(ctx, "set cursor", group, actor, eventID)
	if err != nil {
		return ledger.Cursor{}, err
	}
	if _, err := s.cursors.Put(ctx, kvKey(group, actor), b); err != nil {
		return ledger.Cursor{}, fmt.Errorf("jetstream: set cursor %q/%q: %w", group, actor, err)
	}
	return c, nil
}

// AdvanceCursor implements ledger.Store as a compare-and-set on the
// cursor's KV entry: a Create when there is none, else an Update
// conditional on the revision read, tried again when another writer
// (another relay on the same stream) wrote in between.
func (s *Store) AdvanceCursor(ctx context.Context, group, actor, eventID string) (ledger.Cursor, error) {
	c, b, err := s.cursorTo(ctx, "advance cursor", group, actor, eventID)
	if err != nil {
		return ledger.Cursor{}, err
	}
	key := kvKey(group, actor)
	for range claimRetries {
		e, err := s.cursors.Get(ctx, key)
		if errors.Is(err, natsjs.ErrKeyNotFound) || errors.Is(err, natsjs.ErrKeyDeleted) {
			_, err = s.cursors.Create(ctx, key, b)
			if err == nil {
				return c, nil
			}
			if !kvConflict(err) {
				return ledger.Cursor{}, fmt.Errorf("jetstream: advance cursor %q/%q: %w", group, actor, err)
			}
			continue // another writer created it first: look again
		}
		if err != nil {
			return ledger.Cursor{}, fmt.Errorf("jetstream: advance cursor %q/%q: %w", group, actor, err)
		}
		var cur ledger.Cursor
		if json.Unmarshal(e.Value(), &cur) == nil && cur.Seq >= c.Seq {
			return cur, nil
		}
		_, err = s.cursors.Update(ctx, key, b, e.Revision())
		if err == nil {
			return c, nil
		}
		if !kvConflict(err) {
			return ledger.Cursor{}, fmt.Errorf("jetstream: advance cursor %q/%q: %w", group, actor, err)
		}
	}
	return ledger.Cursor{}, fmt.Errorf("jetstream: advance cursor %q/%q: still contended after %d attempts", group, actor, claimRetries)
}

// kvConflict reports whether a KV Create or Update failed because another
// writer changed the key since it was read (on a replicated stream the
// server reports that with another code, which nats.go maps alike).
func kvConflict(err error) bool {
	return errors.Is(err, natsjs.ErrKeyExists) || errors.Is(err, natsjs.ErrKeyRevisionMismatch) || isConflict(err)
}

// GetCursor implements ledger.Store.
func (s *Store) GetCursor(ctx context.Context, group, actor string) (ledger.Cursor, error) {
	if err := s.check("get cursor"); err != nil {
		return ledger.Cursor{}, err
	}
	if group == "" || actor == "" {
		return ledger.Cursor{}, fmt.Errorf("jetstream: get cursor %q/%q: %w", group, actor, ledger.ErrNotFound)
	}
	e, err := s.cursors.Get(ctx, kvKey(group, actor))
	if errors.Is(err, natsjs.ErrKeyNotFound) || errors.Is(err, natsjs.ErrKeyDeleted) {
		return ledger.Cursor{}, fmt.Errorf("jetstream: get cursor %q/%q: %w", group, actor, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Cursor{}, fmt.Errorf("jetstream: get cursor %q/%q: %w", group, actor, err)
	}
	var c ledger.Cursor
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return ledger.Cursor{}, fmt.Errorf("jetstream: get cursor %q/%q: %w", group, actor, err)
	}
	return c, nil
}

// markKey is the cursors bucket's key of the mark name: kvKey with the
// group "", which no cursor has (SetCursor refuses it).
func markKey(name string) string { return kvKey("", name) }

// SetMark implements ledger.Store: a KV entry in the cursors bucket, last
// write wins. Options.CursorTTL applies to it as to cursors: a mark not
// written for that long disappears, and its reader starts from the
// beginning of the log again.
func (s *Store) SetMark(ctx context.Context, name string, m ledger.Mark) error {
	if err := s.check("set mark"); err != nil {
		return err
	}
	if name == "" || m.Pos < 0 {
		return fmt.Errorf("jetstream: set mark %q: %w: empty name or negative position %d", name, ledger.ErrInvalid, m.Pos)
	}
	b, _ := json.Marshal(m)
	if _, err := s.cursors.Put(ctx, markKey(name), b); err != nil {
		return fmt.Errorf("jetstream: set mark %q: %w", name, err)
	}
	return nil
}

// GetMark implements ledger.Store.
func (s *Store) GetMark(ctx context.Context, name string) (ledger.Mark, error) {
	if err := s.check("get mark"); err != nil {
		return ledger.Mark{}, err
	}
	if name == "" {
		return ledger.Mark{}, fmt.Errorf("jetstream: get mark %q: %w", name, ledger.ErrNotFound)
	}
	e, err := s.cursors.Get(ctx, markKey(name))
	if errors.Is(err, natsjs.ErrKeyNotFound) || errors.Is(err, natsjs.ErrKeyDeleted) {
		return ledger.Mark{}, fmt.Errorf("jetstream: get mark %q: %w", name, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Mark{}, fmt.Errorf("jetstream: get mark %q: %w", name, err)
	}
	var m ledger.Mark
	if err := json.Unmarshal(e.Value(), &m); err != nil {
		return ledger.Mark{}, fmt.Errorf("jetstream: get mark %q: %w", name, err)
	}
	return m, nil
}

// getClaim reads the claim record of an event; a nil entry means none.
func (s *Store) getClaim(ctx context.Context, key string) (natsjs.KeyValueEntry, ledger.Claim, error) {
	e, err := s.claims.Get(ctx, key)
	if errors.Is(err, natsjs.ErrKeyNotFound) || errors.Is(err, natsjs.ErrKeyDeleted) {
		return nil, ledger.Claim{}, nil
	}
	if err != nil {
		return nil, ledger.Claim{}, err
	}
	var c ledger.Claim
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return nil, ledger.Claim{}, fmt.Errorf("bad claim record %s: %w", key, err)
	}
	return e, c, nil
}

// Claim implements ledger.Store. The first claim is a KV Create, which
// only one writer can win; a renewal or a takeover of an expired claim
// is a write conditional on the revision read (compare-and-set). Every
// write carries a per-key TTL of ttl plus claimGrace, so lapsed claims
// leave the bucket by themselves.
func (s *Store) Claim(ctx context.Context, group, eventID, actor string, ttl time.Duration, now time.Time) (ledger.Claim, error) {
	if err := s.check("claim"); err != nil {
		return ledger.Claim{}, err
	}
	if group == "" || actor == "" || eventID == "" {
		return ledger.Claim{}, fmt.Errorf("jetstream: claim: %w: empty group, actor or event id", ledger.ErrInvalid)
	}
	if ttl <= 0 || now.IsZero() {
		return ledger.Claim{}, fmt.Errorf("jetstream: claim: %w: ttl %v at %v", ledger.ErrInvalid, ttl, now)
	}
	ev, err := s.Get(ctx, eventID)
	if err == nil && ev.GroupID != group {
		err = fmt.Errorf("jetstream: event %s is in group %q: %w", eventID, ev.GroupID, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Claim{}, fmt.Errorf("jetstream: claim %s: %w", eventID, err)
	}
	key := kvKey(group, eventID)
	keyTTL := (ttl + claimGrace).Round(time.Second)
	for attempt := 0; attempt < claimRetries; attempt++ {
		e, cur, err := s.getClaim(ctx, key)
		if err != nil {
			return ledger.Claim{}, fmt.Errorf("jetstream: claim %s: %w", eventID, err)
		}
		c := ledger.Claim{GroupID: group, EventID: eventID, Actor: actor, ClaimedAt: now.UTC(), ExpiresAt: now.Add(ttl).UTC()}
		if e == nil {
			b, _ := json.Marshal(c)
			_, err := s.claims.Create(ctx, key, b, natsjs.KeyTTL(keyTTL))
			if err == nil {
				return c, nil
			}
			if !errors.Is(err, natsjs.ErrKeyExists) {
				return ledger.Claim{}, fmt.Errorf("jetstream: claim %s: %w", eventID, err)
			}
			continue // someone else created it first: look again
		}
		if cur.Actor != actor && !cur.Expired(now) {
			return cur, fmt.Errorf("jetstream: claim %s: held by %q until %s: %w", eventID, cur.Actor, cur.ExpiresAt.Format(time.RFC3339), ledger.ErrClaimed)
		}
		if cur.Actor == actor && !cur.Expired(now) {
			c.ClaimedAt = cur.ClaimedAt // a renewal
		}
		b, _ := json.Marshal(c)
		err = s.updateTTL(ctx, key, b, e.Revision(), keyTTL)
		if err == nil {
			return c, nil
		}
		if !isConflict(err) && !errors.Is(err, natsjs.ErrKeyExists) {
			return ledger.Claim{}, fmt.Errorf("jetstream: claim %s: %w", eventID, err)
		}
	}
	return ledger.Claim{}, fmt.Errorf("jetstream: claim %s: still contended after %d attempts", eventID, claimRetries)
}

// updateTTL writes value under key if the key's revision is still rev,
// with a per-message TTL (KV Update cannot set one).
func (s *Store) updateTTL(ctx context.Context, key string, value []byte, rev uint64, ttl time.Duration) error {
	m := nats.NewMsg("$KV." + s.opts.Stream + "_claims." + key)
	m.Data = value
	_, err := s.js.PublishMsg(ctx, m, natsjs.WithExpectLastSequencePerSubject(rev), natsjs.WithMsgTTL(ttl))
	var ae *natsjs.APIError
	if errors.As(err, &ae) && (ae.ErrorCode == errCodeWrongLastSeq || ae.ErrorCode == errCodeWrongLastSeqConst) {
		return fmt.Errorf("%w: %w", &apiError{Code: ae.Code, ErrCode: int(ae.ErrorCode), Description: ae.Description}, err)
	}
	return err
}

// ReleaseClaim implements ledger.Store: a purge of the key, conditional
// on the revision read, so it cannot drop a claim taken meanwhile.
func (s *Store) ReleaseClaim(ctx context.Context, group, eventID, actor string) error {
	if err := s.check("release claim"); err != nil {
		return err
	}
	key := kvKey(group, eventID)
	for attempt := 0; attempt < claimRetries; attempt++ {
		e, cur, err := s.getClaim(ctx, key)
		switch {
		case err != nil:
			return fmt.Errorf("jetstream: release claim %s: %w", eventID, err)
		case e == nil:
			return fmt.Errorf("jetstream: release claim %s: %w", eventID, ledger.ErrNotFound)
		case cur.Actor != actor:
			return fmt.Errorf("jetstream: release claim %s: held by %q: %w", eventID, cur.Actor, ledger.ErrClaimed)
		}
		err = s.claims.Purge(ctx, key, natsjs.LastRevision(e.Revision()), natsjs.PurgeTTL(claimGrace))
		if err == nil {
			return nil
		}
		var ae *natsjs.APIError
		if !errors.As(err, &ae) || (ae.ErrorCode != errCodeWrongLastSeq && ae.ErrorCode != errCodeWrongLastSeqConst) {
			return fmt.Errorf("jetstream: release claim %s: %w", eventID, err)
		}
	}
	return fmt.Errorf("jetstream: release claim %s: still contended after %d attempts", eventID, claimRetries)
}

// ReleaseClaimAsRead implements ledger.Store: a purge conditional on the
// revision of the claim compared with c.
func (s *Store) ReleaseClaimAsRead(ctx context.Context, c ledger.Claim) error {
	if err := s.check("release claim"); err != nil {
		return err
	}
	key := kvKey(c.GroupID, c.EventID)
	for attempt := 0; attempt < claimRetries; attempt++ {
		e, cur, err := s.getClaim(ctx, key)
		switch {
		case err != nil:
			return fmt.Errorf("jetstream: release claim %s: %w", c.EventID, err)
		case e == nil:
			return fmt.Errorf("jetstream: release claim %s: %w", c.EventID, ledger.ErrNotFound)
		case cur.Actor != c.Actor || !cur.ExpiresAt.Equal(c.ExpiresAt):
			return fmt.Errorf("jetstream: release claim %s: held by %q until %s: %w", c.EventID, cur.Actor, cur.ExpiresAt.Format(time.RFC3339Nano), ledger.ErrClaimed)
		}
		err = s.claims.Purge(ctx, key, natsjs.LastRevision(e.Revision()), natsjs.PurgeTTL(claimGrace))
		if err == nil {
			return nil
		}
		var ae *natsjs.APIError
		if !errors.As(err, &ae) || (ae.ErrorCode != errCodeWrongLastSeq && ae.ErrorCode != errCodeWrongLastSeqConst) {
			return fmt.Errorf("jetstream: release claim %s: %w", c.EventID, err)
		}
	}
	return fmt.Errorf("jetstream: release claim %s: still contended after %d attempts", c.EventID, claimRetries)
}

// GetClaim implements ledger.Store.
func (s *Store) GetClaim(ctx context.Context, group, eventID string, now time.Time) (ledger.Claim, error) {
	if err := s.check("get claim"); err != nil {
		return ledger.Claim{}, err
	}
	e, c, err := s.getClaim(ctx, kvKey(group, eventID))
	if err != nil {
		return ledger.Claim{}, fmt.Errorf("jetstream: get claim %s: %w", eventID, err)
	}
	if e == nil || c.Expired(now) {
		return ledger.Claim{}, fmt.Errorf("jetstream: get claim %s: %w", eventID, ledger.ErrNotFound)
	}
	return c, nil
}
