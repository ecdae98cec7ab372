package a2a

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// taskStore is the SDK's task store (taskstore.Store) in memory with a
// bound: at most max tasks, the oldest idle ones forgotten first, so
// that a relay left running for months does not grow without limit. Each
// task belongs to the caller that created it; to anyone else it does not
// exist (A2A §3.3.2: ErrTaskNotFound).
type taskStore struct {
	mu    sync.Mutex
	max   int
	tasks map[sdk.TaskID]*storedTask
	order *list.List // of sdk.TaskID, oldest first
}

type storedTask struct {
	data    []byte // the task as JSON: every Get returns a fresh copy
	state   sdk.TaskState
	version taskstore.TaskVersion
	user    string
	elem    *list.Element
}

var _ taskstore.Store = (*taskStore)(nil)

func newTaskStore(max int) *taskStore {
	return &taskStore{max: max, tasks: map[sdk.TaskID]*storedTask{}, order: list.New()}
}

// userOf is the caller a request runs for (see callerInterceptor).
func userOf(ctx context.Context) (string, error) {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil && cc.User.Name != "" {
		return cc.User.Name, nil
	}
	return "", sdk.ErrUnauthenticated
}

// Create stores a new task, forgetting the oldest finished task when the
// store is full; it fails when every stored task is still open.
func (s *taskStore) Create(ctx context.Context, task *sdk.Task) (taskstore.TaskVersion, error) {
	user, err := userOf(ctx)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	data, err := json.Marshal(task)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("a2a: encoding task: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.tasks[task.ID]; dup {
		return taskstore.TaskVersionMissing, taskstore.ErrTaskAlreadyExists
	}
	if len(s.tasks) >= s.max && !s.evictLocked() {
		return taskstore.TaskVersionMissing, fmt.Errorf("%w: %d open tasks, the most this relay keeps", sdk.ErrServerError, s.max)
	}
	st := &storedTask{data: data, state: task.Status.State, version: 1, user: user}
	st.elem = s.order.PushBack(task.ID)
	s.tasks[task.ID] = st
	return st.version, nil
}

// evictLocked forgets the oldest task that no execution holds: one in a
// final state, or one waiting for its client (input-required,
// auth-required) — else questions never answered would fill the store in
// a relay's tenth month. Tasks still working are bounded by MaxPending.
func (s *taskStore) evictLocked() bool {
	for e := s.order.Front(); e != nil; e = e.Next() {
		id := e.Value.(sdk.TaskID)
		if st := s.tasks[id].state; st.Terminal() || st == sdk.TaskStateInputRequired || st == sdk.TaskStateAuthRequired {
			s.order.Remove(e)
			delete(s.tasks, id)
			return true
		}
	}
	return false
}

// Update replaces a task, checking the version it was read at.
func (s *taskStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	user, err := userOf(ctx)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	data, err := json.Marshal(req.Task)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("a2a: encoding task: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.tasks[req.Task.ID]
	if !ok || st.user != user {
		return taskstore.TaskVersionMissing, sdk.ErrTaskNotFound
	}
	if req.PrevVersion != taskstore.TaskVersionMissing && req.PrevVersion != st.version {
		return taskstore.TaskVersionMissing, taskstore.ErrConcurrentModification
	}
	st.data, st.state = data, req.Task.Status.State
	st.version++
	return st.version, nil
}

// Get returns a copy of the caller's task.
func (s *taskStore) Get(ctx context.Context, id sdk.TaskID) (*taskstore.StoredTask, error) {
	user, err := userOf(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	st, ok := s.tasks[id]
	var data []byte
	var version taskstore.TaskVersion
	if ok && st.user == user {
		data, version = st.data, st.version
	}
	s.mu.Unlock()
	if data == nil {
		return nil, sdk.ErrTaskNotFound
	}
	var t sdk.Task
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("a2a: decoding task: %w", err)
	}
	return &taskstore.StoredTask{Task: &t, Version: version, User: user}, nil
}

// List is not supported: tasks are read one by one with GetTask.
func (s *taskStore) List(ctx context.Context, req *sdk.ListTasksRequest) (*sdk.ListTasksResponse, error) {
	return nil, fmt.Errorf("%w: ListTasks; read a task with GetTask", sdk.ErrUnsupportedOperation)
}
