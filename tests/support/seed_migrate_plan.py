"""The migration script of seeds/todo-task-plan-step.md ("Migrating Old Plans"), verbatim.

The reference `todoflow migrate` must match on every plan it accepts (tests/compiler/test_interop.py).
"""

# fmt: off
# ruff: noqa
import json, os, sys

def migrate_step(step):
    """Flatten todo_task_step into parent step."""
    if step.get('type') != 'todo_task':
        return step
    inner = step.get('todo_task_step')
    if inner is None:
        return step  # already flat
    for field in ['description', 'success_criteria', 'context_dependencies',
                  'context_output', 'validation_schema']:
        if not step.get(field) and field in inner:
            step[field] = inner[field]
    del step['todo_task_step']
    # Recurse into nested todo_task sub-agents in routes
    for route in step.get('predefined_routes', []):
        if route.get('sub_agent_step'):
            route['sub_agent_step'] = migrate_step(route['sub_agent_step'])
    return step

# Usage: python migrate_plan.py path/to/plan.json
path = sys.argv[1]
with open(path) as f:
    data = json.load(f)
changed = False
for i, step in enumerate(data.get('steps', [])):
    if step.get('type') == 'todo_task' and 'todo_task_step' in step:
        data['steps'][i] = migrate_step(step)
        changed = True
if changed:
    with open(path, 'w') as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write('\n')
    print(f'Migrated {path}')
else:
    print(f'{path} already in flat format')
