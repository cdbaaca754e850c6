/* A tiny spinlock on compiler builtins (no pthread: the SDK-less build has
 * no headers, and the critical sections are a few runtime calls long). */
#ifndef CAPSCAN_SPINLOCK_H
#define CAPSCAN_SPINLOCK_H

static inline void capscan_lock(int *lock)
{
    while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(lock, __ATOMIC_RELAXED))
            ;
}

static inline void capscan_unlock(int *lock)
{
    __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
}

#endif
