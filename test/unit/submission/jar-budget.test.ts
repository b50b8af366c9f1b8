import { JarBudget } from '../../../src/submission/jar-budget';

const code = (fn: () => unknown) => {
  try {
    fn();
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code;
  }
};

describe('JarBudget', () => {
  it('reserves the count at once, the bytes step by step, and gives both back on cancel', () => {
    const budget = new JarBudget({ maxCount: 2, maxBytes: 100, maxTotalBytes: 1000 });
    const a = budget.reserve('alice');
    const b = budget.reserve('alice');
    expect(code(() => budget.reserve('alice'))).toBe('GW_JAR_QUOTA');
    a.ensure(60);
    expect(code(() => b.ensure(41))).toBe('GW_JAR_QUOTA');
    // A refused step charges nothing.
    expect(budget.heldBy('alice')).toEqual({ count: 2, bytes: 60 });
    b.ensure(40);
    a.cancel();
    a.cancel();
    expect(budget.heldBy('alice')).toEqual({ count: 1, bytes: 40 });
    expect(budget.heldBy('bob')).toEqual({ count: 0, bytes: 0 });
    expect(budget.total).toBe(40);
  });

  it('keeps a jar at its real size and gives it back by id once', () => {
    const budget = new JarBudget({ maxCount: 5, maxBytes: 100, maxTotalBytes: 1000 });
    const r = budget.reserve('alice', 80);
    r.keep('j1', 30);
    expect(budget.heldBy('alice')).toEqual({ count: 1, bytes: 30 });
    budget.giveBack('j1');
    budget.giveBack('j1');
    expect(budget.heldBy('alice')).toEqual({ count: 0, bytes: 0 });
    expect(budget.total).toBe(0);
    // A jar that is on the JobManager is counted as it is, even past the budget (keep never refuses).
    budget.reserve('alice', 10).keep('j2', 150);
    expect(budget.heldBy('alice')).toEqual({ count: 1, bytes: 150 });
    expect(code(() => budget.reserve('alice', 1))).toBe('GW_JAR_QUOTA');
  });

  it('charges transient jars to the ceiling only', () => {
    const budget = new JarBudget({ maxCount: 1, maxBytes: 10, maxTotalBytes: 100 });
    const t = budget.reserve(undefined);
    t.ensure(95);
    expect(budget.heldBy('alice')).toEqual({ count: 0, bytes: 0 });
    const a = budget.reserve('alice');
    expect(code(() => a.ensure(6))).toBe('GW_JAR_CEILING');
    t.cancel();
    a.ensure(6);
    expect(budget.total).toBe(6);
  });

  it('reconciles only jars kept before the listing was asked for', () => {
    const budget = new JarBudget({ maxCount: 5, maxBytes: 100, maxTotalBytes: 1000 });
    budget.reserve('alice', 1).keep('old', 1);
    const mark = budget.mark();
    budget.reserve('alice', 1).keep('new', 1);
    expect(budget.reconcile(new Set(), mark)).toEqual(['old']);
    expect(budget.heldBy('alice')).toEqual({ count: 1, bytes: 1 });
    expect(budget.reconcile(new Set(), budget.mark())).toEqual(['new']);
  });
});
