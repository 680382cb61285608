/* A shared object that is not a prismlb module: it exports no descriptor. */
int notmodule_answer(void);

int
notmodule_answer(void)
{
    return 42;
}
