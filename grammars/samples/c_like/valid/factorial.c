/* Recursive and iterative factorial. */
int factorial(int n) {
    if (n <= 1) return 1;
    else return n * factorial(n - 1);
}

long factorial_loop(int n) {
    long acc = 1;
    for (int i = 2; i <= n; i++) {
        acc *= i;
    }
    return acc;
}
